"""Integration: a probing run through real Redis and a real Celery worker process, on the
project's example task, equals the `probe` command on the same file and model."""

from __future__ import annotations

import json
import re
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.language_models import registry as model_registry
from evaluations.models import ProbingLayerResult, ProbingRun
from suites.probing.services import probing_task_import
from tests.celery_harness import wait_finished
from tests.conftest import single_torch_thread, token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "probing"
TASK_FILE = EXAMPLE / "subject_number_attractors.txt"


def _wait(pk: int) -> ProbingRun:
    return wait_finished(ProbingRun, pk, what="probing run")


def test_a_run_on_a_real_worker_equals_the_probe_command(
    redis_broker,
    workers,
    tiny_gpt2,  # noqa: F811
    alice,
    tmp_path,
) -> None:
    task = probing_task_import(
        source=TASK_FILE, name="subject_number_attractors", owner=None, task_type="custom"
    )
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    # One thread in the worker, as in the command below: the same arithmetic, bit for bit.
    workers(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    client = token_client(alice)
    body = json.dumps({"task": task.name, "models": [model.name], "pooling": "mean"})
    response = client.post("/api/probing-runs/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    run = _wait(response.json()[0]["id"])
    assert run.status == "done", run.error
    assert run.progress_done == run.progress_total == task.instance_count + 3

    # Asking again returns the run; nothing is computed again.
    again = client.post("/api/probing-runs/", body, content_type="application/json")
    assert again.status_code == 200 and again.json()[0]["id"] == run.pk
    assert ProbingRun.objects.count() == 1 and ProbingLayerResult.objects.count() == 3

    with single_torch_thread():
        call_command(
            "probe",
            "--model",
            str(tiny_gpt2),
            "--task",
            str(TASK_FILE),
            "--type",
            "custom",
            "--out",
            str(tmp_path),
            stderr=StringIO(),
        )
    cli = json.loads((tmp_path / f"{TASK_FILE.stem}.json").read_text())
    stored = json.loads(client.get(f"/probing-runs/{run.pk}/results.json").content)
    for key in (
        "layers",
        "best_layer",
        "best",
        "baselines",
        "confusion",
        "pooling",
        "probe",
        "seeds",
        "mdl",
        "control",
        "best_selectivity",
    ):
        assert stored[key] == cli[key], key
    assert stored["task"]["labels"] == cli["task"]["labels"]
    assert stored["task"]["counts"] == cli["task"]["counts"]
    assert stored["task"]["content_hash"] == cli["task"]["content_hash"] == task.content_hash


def test_progress_is_reported_mid_run_and_a_cancelled_run_stores_nothing(
    redis_broker,
    workers,
    tiny_gpt2,  # noqa: F811
    alice,
    pace,
) -> None:
    from evaluations.probing import services as probing_services
    from evaluations.runs import lifecycle as runs

    task = probing_task_import(source=TASK_FILE, name="attractors", owner=alice)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    # As deployed: storing and progress on one worker, the work on a GPU worker, so that
    # progress is stored while the work is held.
    storing = workers("celery")
    gpu = workers(
        "gpu",
        GYM_RUN_HOLD_DIR=str(pace.folder),
        GYM_PROGRESS_EVERY_SECONDS="0",
        GYM_CANCEL_CHECK_EVERY_SECONDS="0",
    )
    pace.hold()
    run = probing_services.probing_run_request(models=[model], task=task, user=alice).runs[0]
    run = pace.wait_held(run)
    # Held after a batch of vectors (or, when one batch held them all, after a layer).
    assert run.progress_text.startswith(("vectors: ", "probes: ")), run.progress_text
    runs.run_cancel(run=run, user=alice)
    pace.release()
    # The worker stops at its next report and hands nothing over.
    deadline = time.monotonic() + 180
    while not re.search(r"runs\.work\[[^\]]*\] succeeded", gpu.log.read_text()):
        assert time.monotonic() < deadline, gpu.log.read_text()[-3000:]
        time.sleep(0.3)
    assert "were cancelled: stopped after" in gpu.log.read_text()
    assert "runs.store[" not in storing.log.read_text()
    run.refresh_from_db()
    assert run.status == "cancelled" and not ProbingLayerResult.objects.filter(run=run).exists()
