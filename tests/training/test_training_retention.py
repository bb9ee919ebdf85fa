"""Checkpoint retention: every checkpoint (the default), those on the log-spaced schedule
only (the `save_every` ones are resume points), or the last N. Removed folders are
deleted; their models and results stay, marked "weights removed", and are never queued
again. The disk the checkpoints take is on the run page and in the API."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluations.models import Evaluation, LanguageModel
from evaluations.runs import lifecycle as runs
from evaluations.runs.forms import imported_note
from evaluations.training import causal, services, tasks, worker
from evaluations.training.models import TrainingRun
from evaluations.training.services import local_folder
from evaluations.training.worker import run_training
from suites.corpora.services import corpus_import
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES
from tests.training.conftest import book_file

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return book_file(tmp_path_factory.mktemp("corpus"))


def train(corpus: Path, out: Path, *extra: str) -> dict:
    call_command(
        "train", "--corpus", str(corpus), "--kind", "causal", "--steps", "8",
        "--micro-batch", "4", "--checkpoints", "4", "--save-every", "3", "--out", str(out),
        *extra, stdout=io.StringIO(),
    )  # fmt: skip
    return json.loads((out / causal.INFO_NAME).read_text())


def folders(out: Path) -> list[int]:
    return sorted(int(f.name.removeprefix("checkpoint-")) for f in out.glob("checkpoint-*"))


def test_retention_on_the_command_line(corpus, tmp_path) -> None:
    # The schedule is steps 1, 2, 4, 8; save_every 3 adds steps 3 and 6 (256 tokens a step).
    everything = train(corpus, tmp_path / "all")
    assert folders(tmp_path / "all") == [256, 512, 768, 1024, 1536, 2048]
    assert [(c["tokens"], c["scheduled"]) for c in everything["checkpoints"]] == [
        (256, True), (512, True), (768, False), (1024, True), (1536, False), (2048, True),
    ]  # fmt: skip
    assert not any(c.get("removed") for c in everything["checkpoints"])

    schedule = train(corpus, tmp_path / "schedule", "--retention", "schedule")
    assert folders(tmp_path / "schedule") == [256, 512, 1024, 2048]
    assert [c["tokens"] for c in schedule["checkpoints"] if c.get("removed")] == [768, 1536]

    last = train(corpus, tmp_path / "last", "--retention", "last", "--keep-last", "2")
    assert folders(tmp_path / "last") == [1536, 2048]
    assert [c["tokens"] for c in last["checkpoints"] if c.get("removed")] == [256, 512, 768, 1024]
    # Retention changes what stays on disk, never the training.
    assert last["final_loss"] == everything["final_loss"] == schedule["final_loss"]

    # A resume starts from the newest checkpoint, which retention always keeps.
    resumed = tmp_path / "resumed"
    train(corpus, resumed, "--retention", "last", "--keep-last", "1", "--stop-after-step", "4")
    assert folders(resumed) == [1024]
    again = train(corpus, resumed, "--retention", "last", "--keep-last", "1")
    assert again["resumed_from_step"] == 4 and folders(resumed) == [2048]
    assert again["final_loss"] == pytest.approx(everything["final_loss"], abs=1e-6)

    for extra, message in (
        (("--retention", "last"), "retention 'last' keeps 1 checkpoint or more; got 0"),
        (("--save-every", "-1"), "save_every is 0 \\(none\\) or a number of steps; got -1"),
        (("--retention", "newest"), "invalid choice: 'newest'"),
    ):
        with pytest.raises(CommandError, match=message):
            train(corpus, tmp_path / "x", *extra)
    assert not (tmp_path / "x").exists()


@pytest.mark.django_db
def test_removed_checkpoints_keep_their_models_and_are_never_queued(
    training_dirs,
    corpus,
    alice,
    alice_client,
    anon_client,
    _private_broker,
    monkeypatch,
) -> None:
    book = corpus_import(source=corpus, name="book", owner=None)
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    for options, field, message in (
        ({"retention": "newest"}, "retention",
         "retention must be one of all, schedule, last, not 'newest'"),
        ({"retention": "last"}, "options", "retention 'last' keeps 1 checkpoint or more; got 0"),
        ({"keep_last": "x"}, "keep_last", "keep_last must be a whole number, not 'x'"),
        ({"save_every": -2}, "save_every", "save_every must be from 0 to 10,000,000; got -2"),
    ):  # fmt: skip
        with pytest.raises(services.TrainingRequestInvalid) as caught:
            services.training_request(
                corpus=book, name="m", kind="causal", options=options, user=alice
            )
        assert caught.value.errors == {field: message}
    run = services.training_request(
        corpus=book,
        name="kept",
        kind="causal",
        options={"steps": 4, "checkpoints": 2, "micro_batch": 4, "retention": "last",
                 "keep_last": 1},
        suites=[suite],
        user=alice,
    )  # fmt: skip
    assert (run.options["retention"], run.options["keep_last"]) == ("last", 1)
    reports: list[dict] = []

    def record(task, *args, best_effort=False):
        if task is tasks.checkpoint:  # what the worker sends the default queue
            reports.append(args[3])

    monkeypatch.setattr(worker, "_send", record)
    results = run_training(services.training_payload(run), progress=lambda d, t: None)
    out = local_folder(run)
    assert folders(out) == [1024]
    assert [(r["tokens"], r["removed"]) for r in reports] == [(256, []), (1024, ["checkpoint-256"])]
    for point in reports:
        services.training_checkpoint_store(run_id=run.pk, attempt=1, point=point, entries=[])
    run.refresh_from_db()
    assert [(c["tokens"], c.get("removed", False)) for c in run.checkpoints] == [
        (256, True),
        (1024, False),
    ]
    removed = LanguageModel.objects.get(name="kept-256")
    assert removed.weights_removed_at is not None
    # The last step's checkpoint is the finished model itself (the same weights).
    assert run.checkpoints[1]["model"] == "kept"
    assert LanguageModel.objects.get(name="kept").weights_removed_at is None
    # Its evaluation queued before the removal is kept; nothing new is queued on it.
    assert Evaluation.objects.filter(model=removed, suite=suite).count() == 1
    with pytest.raises(runs.WeightsRemoved) as removed_caught:
        runs.kind_named("suite").request_runs(models=[removed], benchmarks=[suite], user=alice)
    assert str(removed_caught.value) == (
        "kept-256: weights removed (its training run's checkpoint retention deleted the "
        "folder), so no worker can load it; its results are kept."
    )
    # Run forms list it disabled, with the reason.
    assert imported_note(removed) == "weights removed, cannot run"
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}
    response = alice_client.post(
        "/api/evaluations/",
        json.dumps({"model": "kept-256", "suites": [suite.name]}),
        content_type="application/json",
        **headers,
    )
    assert response.status_code == 400
    assert "kept-256: weights removed" in response.json()["errors"][0]["message"]

    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    kept_bytes = sum(f.stat().st_size for f in (out / "checkpoint-1024").rglob("*") if f.is_file())
    assert run.disk_bytes == run.checkpoints[1]["bytes"] == kept_bytes
    detail = anon_client.get(f"/api/training-runs/{run.pk}/").json()
    assert detail["disk_bytes"] == kept_bytes
    assert [c.get("removed", False) for c in detail["checkpoints"]] == [True, False]
    html = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert '<span class="muted">weights removed</span>' in html
    assert "Retention: the last 1; 1 removed (their models and results are kept" in html
    page = anon_client.get("/models/kept-256/").content.decode()
    assert "<strong>Weights removed</strong>" in page


@pytest.mark.django_db
def test_a_report_lost_on_the_way_registers_the_removed_checkpoint_once(
    training_dirs, corpus, alice, _private_broker
) -> None:
    """The results alone (no checkpoint report arrived) register every checkpoint, the
    removed ones marked and left out of the evaluations."""
    book = corpus_import(source=corpus, name="book", owner=None)
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    run = services.training_request(
        corpus=book, name="lost", kind="causal", suites=[suite], user=alice,
        options={"steps": 4, "checkpoints": 2, "micro_batch": 4, "save_every": 3,
                 "retention": "schedule"},
    )  # fmt: skip
    results = {
        "kind": "causal",
        "summary": {"steps_done": 4},
        "log": [],
        "checkpoints": [
            {"step": 1, "tokens": 256, "folder": "checkpoint-256", "scheduled": True},
            {"step": 3, "tokens": 768, "folder": "checkpoint-768", "scheduled": False,
             "removed": True},
            {"step": 4, "tokens": 1024, "folder": "checkpoint-1024", "scheduled": True},
        ],
    }  # fmt: skip
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run = TrainingRun.objects.get(pk=run.pk)
    assert [(c["model"], c["scheduled"], c.get("removed", False)) for c in run.checkpoints] == [
        ("lost-256", True, False),
        ("lost-768", False, True),
        ("lost", True, False),
    ]
    assert LanguageModel.objects.get(name="lost-768").weights_removed_at is not None
    assert sorted(Evaluation.objects.values_list("model__name", flat=True)) == [
        "lost",
        "lost-256",
    ]
