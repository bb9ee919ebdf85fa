"""A series evaluated through real Redis and a real Celery worker: one request for a suite
and a minimal-pair set on three Trainer checkpoints loads each checkpoint once (the
worker's log says each load from disk), and the curves fill in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluations.models import Evaluation, PairEvaluation
from evaluations.training import series as series_services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import wait_finished
from tests.conftest import small_suite, token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_each_checkpoint_is_loaded_once_per_request(
    redis_broker, workers, alice, trainer_folder: Path, example_pairs
) -> None:
    suite_services.suite_import(source=small_suite("agree"), owner=alice)
    made = series_services.series_register(name="trainer", folder=str(trainer_folder))
    # The worker keeps one model loaded: a checkpoint's suite and pair tasks must follow
    # each other for it to be loaded once (kind after kind, it would be loaded twice).
    worker = workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", GYM_MAX_LOADED_MODELS="1")
    client = token_client(alice)
    response = client.post(
        "/api/model-series/trainer/evaluate/",
        json.dumps({"suites": ["agree"], "pair_sets": ["agreement"]}),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    for run in Evaluation.objects.all():
        assert wait_finished(Evaluation, run.pk, what="suite run").status == "done"
    for pair_run in PairEvaluation.objects.all():
        assert wait_finished(PairEvaluation, pair_run.pk, what="pair run").status == "done"
    assert Evaluation.objects.count() == PairEvaluation.objects.count() == 3
    log = worker.log.read_text()
    for member in made.members.select_related("model"):
        loads = log.count(f"loaded model {member.model.source} (revision")
        assert loads == 1, (member.model.source, log[-3000:])
    curves = client.get("/api/model-series/trainer/curves/").json()["curves"]
    assert sorted(c["benchmark"] for c in curves) == ["agree", "agreement"]
    for curve in curves:
        assert all(p["accuracy"] is not None for p in curve["points"]), curve
