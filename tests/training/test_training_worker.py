"""Integration: a training run through real Redis and real Celery workers (one storing,
one "GPU" worker, as deployed): a tiny causal model trains with two checkpoints, each is
registered as a model and evaluated on a suite through ordinary runs, and the learning
curves read their accuracies."""

from __future__ import annotations

import json

import pytest

from evaluations.models import Evaluation, LanguageModel
from evaluations.training import selectors
from evaluations.training.models import TrainingRun
from suites.syntaxgym.services import suite_import
from tests.celery_harness import until, wait_finished
from tests.conftest import EXAMPLES, token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_training_with_two_checkpoints_on_real_workers(
    book_corpus, redis_broker, workers, alice
) -> None:
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    storing = workers("celery")
    training = workers("gpu", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    body = {
        "corpus": book_corpus.name,
        "name": "book-tiny",
        "kind": "causal",
        "options": {"preset": "tiny", "steps": 4, "checkpoints": 2, "micro_batch": 4},
        "suites": [suite.name],
    }
    response = client.post("/api/training-runs/", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    pk = response.json()["id"]
    run = wait_finished(TrainingRun, pk, what="the training run")
    logs = training.log.read_text()[-3000:] + storing.log.read_text()[-3000:]
    assert run.status == "done", (run.error, logs)
    # The checkpoints and the loss curve were reported while it trained, not only at the end.
    assert "unregistered task" not in storing.log.read_text()
    assert "training.checkpoint" in storing.log.read_text()
    assert [(c["step"], c["tokens"], c["model"]) for c in run.checkpoints] == [
        (1, 256, "book-tiny-256"),
        (4, 1024, "book-tiny"),  # the last step's: the finished model itself
    ]
    assert all(c["validation_loss"] > 0 for c in run.checkpoints)
    assert sorted(LanguageModel.objects.values_list("display_name", flat=True)) == [
        "book-tiny",
        "book-tiny@256",
    ]
    # The loss curve arrived: every step once (the last report comes with the results).
    assert [e["step"] for e in run.log if "loss" in e] == [1, 2, 3, 4]

    # The first checkpoint and the finished model (the last checkpoint), evaluated once each.
    def suite_runs_finished() -> list[Evaluation]:
        found = list(Evaluation.objects.filter(suite=suite))
        return found if len(found) == 2 and all(e.finished for e in found) else []

    evaluations = until("the checkpoints' suite runs", suite_runs_finished)
    assert all(e.status == "done" for e in evaluations), [e.error for e in evaluations]
    curves = selectors.learning_curves(run)
    [row] = curves["suites"]
    assert [p["tokens"] for p in row["points"]] == [256, 1024]
    assert all(0.0 <= p["accuracy"] <= 1.0 for p in row["points"])
    page = client.get(f"/training/{pk}/").content.decode()
    assert "book-tiny@256" in page and "Age of acquisition" in page
