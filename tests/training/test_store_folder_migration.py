"""The migration that takes the web host's path out of a training run's row (evaluations
0020, issue 44): each row gets its folder in the artifact store (the same name the run's
files were stored under before), its path moves to the column only artifacts_migrate
reads, and undoing the migration puts the path back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from evaluations.training import stored
from suites.corpora.services import corpus_import

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("evaluations", "0019_model_series")
AFTER = ("evaluations", "0020_h44a_training_store_folder")


def _migrate(*targets: tuple[str, str]) -> Apps:
    executor = MigrationExecutor(connection)
    executor.migrate(list(targets))
    return MigrationExecutor(connection).loader.project_state(list(targets)).apps


@pytest.fixture
def latest() -> Iterator[None]:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    yield
    _migrate(*leaves)


def test_a_runs_path_becomes_its_store_folder_and_comes_back(latest, settings, tmp_path) -> None:
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    (tmp_path / "book.txt").write_text("the dog barks\nthe dogs bark\n", encoding="utf-8")
    corpus = corpus_import(source=tmp_path / "book.txt", name="book", owner=None)
    old = _migrate(BEFORE)
    model = old.get_model("evaluations", "LanguageModel").objects.create(
        name="book-lm", display_name="Book LM", source="/srv/gym/models/trained/book-lm"
    )
    run = old.get_model("evaluations", "TrainingRun").objects.create(
        model=model,
        corpus_id=corpus.pk,
        content_hash=corpus.content_hash,
        training_kind="causal",
        out_dir="/srv/gym/models/trained/book-lm",
    )

    # The model as of that migration: later ones add columns this table has not yet.
    moved = _migrate(AFTER).get_model("evaluations", "TrainingRun").objects.get(pk=run.pk)
    assert moved.store_folder == stored.folder_name("book-lm", run.pk, moved.created_at)
    assert stored.run_id_of(f"trained/{moved.store_folder}/model") == run.pk
    assert stored.name_of(moved.store_folder) == "book-lm"
    assert moved.legacy_out_dir == "/srv/gym/models/trained/book-lm"

    back = _migrate(BEFORE).get_model("evaluations", "TrainingRun").objects.get(pk=run.pk)
    assert back.out_dir == "/srv/gym/models/trained/book-lm"
