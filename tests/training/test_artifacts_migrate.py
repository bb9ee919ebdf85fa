"""manage.py artifacts_migrate: an install from before the artifact store (corpora in
GYM_CORPUS_DIR, models named by their paths) moved into the store: what the database
references is copied and checked, the model rows point at the store, what cannot be
found is reported, and a second run does nothing."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings

from evaluations.models import LanguageModel, TrainingRun
from evaluations.scoring.loading import clear_model_cache, load_model
from evaluations.training import services
from evaluations.training.services import local_folder
from evaluations.training.worker import run_training
from gym import artifacts
from suites.corpora.services import corpus_import
from tests.scoring.test_ngram import TINY_ARPA

pytestmark = pytest.mark.django_db


def _migrate(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("artifacts_migrate", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_an_old_install_moves_into_the_store_once(book_corpus, alice, tmp_path) -> None:
    run = services.training_request(
        corpus=book_corpus, name="book-3gram", kind="ngram", options={"order": 2}, user=alice
    )
    results = run_training(services.training_payload(run), progress=lambda done, total: None)
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    arpa = local_folder(run) / "model.arpa"
    upload = tmp_path / "uploads" / "f00d" / "model.arpa"
    upload.parent.mkdir(parents=True)
    upload.write_text(TINY_ARPA, encoding="utf-8")
    mine = LanguageModel.objects.create(
        name="mine",
        display_name="Mine",
        source=str(upload),
        kind="ngram",
        upload_key="f00d/model.arpa",
        content_hash="f00d" * 16,
    )
    gone = corpus_import(source=_text(tmp_path / "gone.txt"), name="gone", owner=None)
    # As before the store: rows name paths, and the store (a new folder) holds nothing.
    LanguageModel.objects.filter(pk=run.model.pk).update(source=str(arpa))
    TrainingRun.objects.filter(pk=run.pk).update(legacy_out_dir=str(local_folder(run)))
    gone.path.unlink()
    fresh = artifacts.artifact_storage("", tmp_path / "new-store", endpoint="", region="x")
    with override_settings(
        STORAGES={"artifacts": fresh, "default": fresh}, GYM_ARTIFACTS_DIR=tmp_path / "new-store"
    ):
        said = _migrate("--dry-run")
        assert f"artifacts_migrate into {tmp_path / 'new-store'}:" in said
        assert "would copy 3, 0 there already, 2 model row(s) to point at the store" in said
        assert "1 missing" in said and "missing: corpus gone" in said
        assert artifacts.list_prefix("") == []
        assert LanguageModel.objects.get(pk=mine.pk).source == str(upload)

        said = _migrate()
        assert "copied 3, 0 there already, 2 model row(s) pointed at the store, 1 missing" in said
        assert artifacts.exists(book_corpus.artifact_key)
        model = LanguageModel.objects.get(pk=run.model.pk)
        assert model.source == services.model_artifact_source(run)
        assert LanguageModel.objects.get(pk=mine.pk).source == (
            f"artifact:models/uploaded/{'f00d' * 16}/model.arpa"
        )
        clear_model_cache()
        loaded = load_model(model.source, kind="ngram")
        assert loaded.order == 2  # type: ignore[union-attr]
        # The files were left where they were; the run's row no longer names its folder
        # (all of it is in the store: nothing is read from the path again).
        assert arpa.is_file() and upload.is_file()
        assert TrainingRun.objects.get(pk=run.pk).legacy_out_dir == ""

        keys = artifacts.list_prefix("")
        said = _migrate()
        assert "copied 0, 2 there already, 0 model row(s) pointed at the store" in said
        assert artifacts.list_prefix("") == keys


def _text(path: Path) -> Path:
    path.write_text("a line that will be lost\n", encoding="utf-8")
    return path


def test_a_copy_whose_hash_differs_is_refused(book_corpus, tmp_path) -> None:
    # A corpus file changed on disk after its import: it is not the text the row names.
    fresh = artifacts.artifact_storage("", tmp_path / "new-store", endpoint="", region="x")
    shutil.copyfile(book_corpus.path, tmp_path / "saved")
    book_corpus.path.unlink()
    (tmp_path / "changed.txt").write_text("other text\n", encoding="utf-8")
    shutil.copyfile(tmp_path / "changed.txt", book_corpus.path)
    with override_settings(STORAGES={"artifacts": fresh, "default": fresh}):
        said = _migrate()
        assert "missing: corpus book" in said and "the file's hash is" in said
        assert artifacts.list_prefix("corpora") == []


def _folder_model(tmp_path: Path) -> tuple[LanguageModel, Path]:
    """An uploaded model from before the store: a folder on this host."""
    folder = tmp_path / "uploads" / "beef"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights " * 100)
    model = LanguageModel.objects.create(
        name="folder",
        display_name="Folder",
        source=str(folder),
        upload_key="beef",
        content_hash="beef" * 16,
    )
    return model, folder


def test_a_half_copied_folder_is_copied_again_and_a_damaged_copy_replaced(
    book_corpus, tmp_path
) -> None:
    model, folder = _folder_model(tmp_path)
    key = f"models/uploaded/{'beef' * 16}"
    fresh = artifacts.artifact_storage("", tmp_path / "new-store", endpoint="", region="x")
    with override_settings(
        STORAGES={"artifacts": fresh, "default": fresh}, GYM_ARTIFACTS_DIR=tmp_path / "new-store"
    ):
        # An earlier run stopped halfway: one file of the folder, no manifest; and the
        # corpus's key holds other bytes (a copy damaged in the store).
        artifacts.put_file(f"{key}/files/config.json", folder / "config.json")
        artifacts.put_file(book_corpus.artifact_key, io.BytesIO(b"not the corpus\n"))
        said = _migrate()
        assert "copied 2, 0 there already, 1 model row(s) pointed at the store" in said, said
        assert "0 missing, 0 damaged" in said
        assert "replacing a stored copy whose content's hash is not" in said
        assert [e["path"] for e in artifacts.read_manifest(key)] == [
            "config.json",
            "model.safetensors",
        ]
        assert artifacts.stored_problem(key) == ""
        assert artifacts.stored_problem(book_corpus.artifact_key) == ""
        assert LanguageModel.objects.get(pk=model.pk).source == f"artifact:{key}"

        # Damaged again, now with no good file here: reported, not hidden, not replaced.
        stored_weights = tmp_path / "new-store" / key / "files" / "model.safetensors"
        stored_weights.unlink()  # a hard link to the upload: never write through it
        stored_weights.write_bytes(b"flipped bits")
        saved = tmp_path / "saved-corpus"
        shutil.move(book_corpus.path, saved)
        artifacts.delete(book_corpus.artifact_key)
        artifacts.put_file(book_corpus.artifact_key, io.BytesIO(b"not the corpus\n"))
        said = _migrate()
        assert "copied 0, 0 there already" in said and "2 damaged" in said, said
        assert (
            f"damaged: uploaded model folder ({key}): its file model.safetensors does not "
            "match its manifest's hash"
        ) in said
        assert f"damaged: corpus book ({book_corpus.artifact_key}): its content's hash" in said
        assert "failed their hash check" in said
        assert stored_weights.read_bytes() == b"flipped bits"
        shutil.move(saved, book_corpus.path)


def test_models_registered_by_a_path_move_into_the_store(tiny_gpt2, model_dir, tmp_path) -> None:
    """An administrator's models named by their paths (a folder, an ARPA file, as the
    baselines are): copied under models/local/, pointed at, loaded from there; a second
    run leaves them in the store."""
    from evaluations.language_models.registry import model_register

    base = model_dir
    folder = base / "lab-gpt2"
    shutil.copytree(tiny_gpt2, folder)
    arpa = base / "lab.arpa"
    arpa.write_text(TINY_ARPA, encoding="utf-8")
    neural = model_register(source=str(folder), name="lab-gpt2")
    ngram = model_register(source=str(arpa), name="lab-3gram")
    hub = LanguageModel.objects.create(name="hub", display_name="Hub", source="gpt2")
    assert neural.source == str(folder.resolve())
    fresh = artifacts.artifact_storage("", tmp_path / "new-store", endpoint="", region="x")
    with override_settings(
        STORAGES={"artifacts": fresh, "default": fresh}, GYM_ARTIFACTS_DIR=tmp_path / "new-store"
    ):
        said = _migrate()
        assert "copied 2, 0 there already, 2 model row(s) pointed at the store" in said, said
        neural.refresh_from_db()
        ngram.refresh_from_db()
        assert neural.source.startswith("artifact:models/local/")
        assert ngram.source.startswith("artifact:models/local/")
        assert ngram.source.endswith("/lab.arpa")
        assert LanguageModel.objects.get(pk=hub.pk).source == "gpt2"  # a hub id: no path
        assert str(base) not in neural.source + ngram.source
        clear_model_cache()
        assert load_model(ngram.source, kind="ngram").order == 3  # type: ignore[union-attr]
        assert load_model(neural.source, kind="causal") is not None
        keys = artifacts.list_prefix("")
        assert "copied 0" in _migrate() and artifacts.list_prefix("") == keys
