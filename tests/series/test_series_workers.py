"""A series evaluated through real Redis and a real Celery worker: one request for a suite,
a minimal-pair set and a probing task on three Trainer checkpoints loads each checkpoint
once (the worker's log says each load from disk), and the curves fill in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluations.models import Evaluation, PairEvaluation, ProbingRun
from evaluations.training import series as series_services
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.celery_harness import wait_finished
from tests.conftest import small_suite, token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_TASK = EXAMPLES / "probing" / "subject_number_attractors.txt"


def small_probing_task(folder: Path) -> Path:
    """The example probing task cut to 24 tr, 8 va and 8 te sentences: the worker's path
    (hidden states of every layer, a probe per layer) at a tenth of the work."""
    wanted = {"tr": 24, "va": 8, "te": 8}
    kept = []
    for line in EXAMPLE_TASK.read_text(encoding="utf-8").splitlines():
        partition = line.split("\t", 1)[0]
        if wanted.get(partition, 0) > 0:
            wanted[partition] -= 1
            kept.append(line)
    path = folder / "attractors.txt"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def test_each_checkpoint_is_loaded_once_per_request(
    redis_broker, workers, alice, trainer_folder: Path, example_pairs, tmp_path: Path
) -> None:
    suite_services.suite_import(source=small_suite("agree"), owner=alice)
    probing_task_import(
        source=small_probing_task(tmp_path), name="attractors", owner=None, task_type="custom"
    )
    made = series_services.series_register(name="trainer", folder=str(trainer_folder))
    # The worker keeps one model loaded: a checkpoint's suite, pair and probing tasks must
    # follow each other for it to be loaded once (kind after kind, it would be loaded three
    # times); probing loads through its own worker path, so it is asked for here too.
    worker = workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", GYM_MAX_LOADED_MODELS="1")
    client = token_client(alice)
    response = client.post(
        "/api/model-series/trainer/evaluate/",
        json.dumps(
            {"suites": ["agree"], "pair_sets": ["agreement"], "probing_tasks": ["attractors"]}
        ),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    for run in Evaluation.objects.all():
        assert wait_finished(Evaluation, run.pk, what="suite run").status == "done"
    for pair_run in PairEvaluation.objects.all():
        assert wait_finished(PairEvaluation, pair_run.pk, what="pair run").status == "done"
    for probe in ProbingRun.objects.all():
        finished = wait_finished(ProbingRun, probe.pk, what="probing run")
        assert finished.status == "done", finished.error
    assert Evaluation.objects.count() == PairEvaluation.objects.count() == 3
    assert ProbingRun.objects.count() == 3
    log = worker.log.read_text()
    for member in made.members.select_related("model"):
        loads = log.count(f"loaded model {member.model.source} (revision")
        assert loads == 1, (member.model.source, log[-3000:])
    curves = client.get("/api/model-series/trainer/curves/").json()["curves"]
    assert sorted(c["benchmark"] for c in curves) == ["agree", "agreement", "attractors"]
    for curve in curves:
        assert all(p["accuracy"] is not None for p in curve["points"]), curve
