"""The migration that moved each evaluation's snapshot out of the evaluation's row into a
table of its own (evaluations 0012) carries every existing snapshot over unchanged, and
undoing it puts every snapshot back into the column."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from evaluations.models import EvaluationSnapshot, LanguageModel
from suites.models import Suite
from suites.syntaxgym import selectors
from suites.syntaxgym import services as suite_services
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("evaluations", "0011_evaluation_word_probability")
MOVED = ("evaluations", "0012_evaluation_snapshot_table")


def _migrate(*targets: tuple[str, str]) -> Apps:
    """Move the test database to `targets`; the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(list(targets))
    return MigrationExecutor(connection).loader.project_state(list(targets)).apps


@pytest.fixture
def latest() -> Iterator[list[tuple[str, str]]]:
    """Every app's newest migration: where the database is left afterwards, whatever
    the test did, so that the tests after it find the schema they expect."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    yield leaves
    _migrate(*leaves)


def _snapshots(suite: Suite) -> list[dict[str, Any]]:
    """Snapshots as they are found in sites: a real suite's canonical form, an empty one
    (older tests and imports), and one with text a careless copy would change."""
    return [
        selectors.suite_canonical(suite),
        {},
        {
            "meta": {"name": "Ünïcode \u201cquotes\u201d \\ and \u2028", "metric": "mean"},
            "region_meta": {"1": "première", "2": "中文"},
            "items": [{"item_number": 7, "conditions": [], "note": None}],
            "predictions": [{"type": "formula", "formula": "(1;%a%) > (1;%b%)"}],
            "numbers": [0.1, 1e-300, -0.0, 12345678901234567890, True, False],
        },
    ]


def test_every_snapshot_is_moved_to_its_own_table_and_back(alice, latest) -> None:
    suite = suite_services.suite_import(source=small_suite("moved"), owner=alice).suite
    wanted = _snapshots(suite)
    models = [
        LanguageModel.objects.create(name=f"m{i}", display_name=f"M{i}", source=f"hub/m{i}")
        for i in range(len(wanted))
    ]

    old = _migrate(BEFORE)
    OldEvaluation = old.get_model("evaluations", "Evaluation")
    made = {
        OldEvaluation.objects.create(
            model_id=model.pk,
            suite_id=suite.pk,
            content_hash=suite.content_hash,
            snapshot=snapshot,
            status="done",
            accuracy=0.5,
        ).pk: snapshot
        for model, snapshot in zip(models, wanted, strict=True)
    }

    # The models as they were right after the move: later migrations add columns that
    # the database does not have at this point.
    now = _migrate(MOVED)
    MovedEvaluation = now.get_model("evaluations", "Evaluation")
    MovedSnapshot = now.get_model("evaluations", "EvaluationSnapshot")
    moved = dict(MovedSnapshot.objects.values_list("evaluation_id", "content"))
    assert moved == made
    for pk, snapshot in made.items():
        evaluation = MovedEvaluation.objects.get(pk=pk)
        assert MovedSnapshot.objects.get(evaluation_id=pk).content == snapshot
        assert (evaluation.status, evaluation.accuracy) == ("done", 0.5)

    # Undone: each snapshot is in the evaluation's column again, as it was.
    back = _migrate(BEFORE)
    BackEvaluation = back.get_model("evaluations", "Evaluation")
    assert dict(BackEvaluation.objects.values_list("pk", "snapshot")) == made
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
    assert EvaluationSnapshot._meta.db_table not in tables


def test_a_site_without_evaluations_migrates_both_ways(latest) -> None:
    _migrate(BEFORE)
    now = _migrate(MOVED)
    assert not now.get_model("evaluations", "EvaluationSnapshot").objects.exists()
    _migrate(BEFORE)
