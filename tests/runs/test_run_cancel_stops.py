"""Cancelling a run stops the worker that is computing it, through a real worker, the
real broker and the real database: the work stops between two batches, nothing is
stored, the run stays cancelled, and the worker takes the next run."""

from __future__ import annotations

import re

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult
from evaluations.runs import broker_watch
from evaluations.runs import lifecycle as runs
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import wait_for_log
from tests.conftest import small_suite
from tests.runs.test_run_packing import received
from tests.syntaxgym.test_evaluation_worker import _big_suite, _wait

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STOPPED = re.compile(r"were cancelled: stopped after (\d+) of (\d+) sentences")
DROPPED = "before its work started: dropped"


def _env(pace) -> dict[str, str]:
    return {
        "GYM_RUN_HOLD_DIR": str(pace.folder),
        "GYM_PROGRESS_EVERY_SECONDS": "0",
        # Ask at every batch, so that the stop comes at the first batch after the cancel.
        "GYM_CANCEL_CHECK_EVERY_SECONDS": "0",
    }


@pytest.mark.parametrize(
    ("budget", "task", "sizes"),
    [(0, "runs.work", (400,)), (32768, "runs.work_pack", (200, 201))],
    ids=["one run per task", "two runs in one packed task"],
)
def test_cancel_stops_the_worker_and_it_takes_the_next_run(
    redis_broker, workers, tiny_gpt2, alice, pace, settings, budget, task, sizes
) -> None:
    settings.GYM_PACK_TOKEN_BUDGET = budget
    suites = [_big_suite(n) for n in sizes]
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    store = workers("celery", **_env(pace))
    gpu = workers("gpu", **_env(pace))
    pace.hold()
    cancelled = services.evaluation_request(model=model, suites=suites, user=alice).evaluations
    pace.wait_held(cancelled[0])
    for evaluation in cancelled:
        runs.run_cancel(run=evaluation, user=alice)
    pace.release()
    wait_for_log(gpu, "were cancelled: stopped after", timeout=180)
    # The worker is free: a new run goes through it to the end.
    fresh_suite = suite_services.suite_import(source=small_suite("after the cancel"), owner=alice)
    fresh = services.evaluation_request(model=model, suites=[fresh_suite.suite], user=alice)
    (fresh_run,) = _wait([fresh.evaluations[0].pk], timeout=300)
    assert fresh_run.status == "done", fresh_run.error
    assert ItemResult.objects.filter(evaluation=fresh_run).count() == 2
    for evaluation in Evaluation.objects.filter(pk__in=[e.pk for e in cancelled]):
        assert evaluation.status == "cancelled"
        assert evaluation.progress_done < evaluation.progress_total
        assert not ItemResult.objects.filter(evaluation=evaluation).exists()
    # The task stopped between two batches, mid-way, and ended (acknowledged, nothing
    # handed over): the only results the storing worker received are the new run's.
    ((done, total),) = STOPPED.findall(gpu.log.read_text())
    assert 0 < int(done) < int(total) == sum(4 * n for n in sizes)
    assert received(gpu, task) == 2
    assert received(store, "runs.store") + received(store, "runs.store_part") == 1


def test_a_cancelled_run_still_queued_is_dropped_when_a_worker_takes_it(
    redis_broker, workers, tiny_gpt2, alice, pace, settings
) -> None:
    settings.GYM_PACK_TOKEN_BUDGET = 0  # one task per run: the second waits in the queue
    first_suite, second_suite = _big_suite(300), _big_suite(301)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    workers("celery", **_env(pace))
    gpu = workers("gpu", **_env(pace))
    pace.hold()
    first, second = services.evaluation_request(
        model=model, suites=[first_suite, second_suite], user=alice
    ).evaluations
    pace.wait_held(first)
    runs.run_cancel(run=second, user=alice)
    assert broker_watch.cancelled_among("suite", [(first.pk, 1), (second.pk, 1)]) == {
        (second.pk, 1)
    }
    pace.release()
    first, second = _wait([first.pk, second.pk], timeout=300)
    assert (first.status, second.status) == ("done", "cancelled")
    wait_for_log(gpu, DROPPED, timeout=180)
    assert not STOPPED.search(gpu.log.read_text())
    second.refresh_from_db()
    # Taken, dropped before any work: no progress was ever reported for it.
    assert (second.status, second.started_at, second.progress_done) == ("cancelled", None, 0)
    assert not ItemResult.objects.filter(evaluation=second).exists()
