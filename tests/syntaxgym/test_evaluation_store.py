"""Storing results is idempotent and the status machine never goes backwards; requesting
twice gives one evaluation; a changed suite gets a new one and the old one is outdated.
Results come from the real scoring engine on a tiny local model (no worker needed)."""

from __future__ import annotations

import json

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult, PredictionResult
from evaluations.runs import lifecycle as runs
from evaluations.runs import tasks
from evaluations.scoring import worker
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import broker, eager_tasks
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(tiny_gpt2, alice, django_capture_on_commit_callbacks):
    suite = suite_services.suite_import(source=small_suite("store me"), owner=alice).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    # The work is published when the request's transaction commits.
    with django_capture_on_commit_callbacks(execute=True) as published:
        outcome = services.evaluation_request(model=model, suites=[suite], user=alice)
    assert len(published) == 1
    evaluation = outcome.evaluations[0]
    evaluation.refresh_from_db()
    payload = services.scoring_payload(evaluation)
    results = worker.run_scoring(payload)
    return suite, model, evaluation, results


def test_request_twice_gives_one_evaluation(setup, alice) -> None:
    suite, model, evaluation, _ = setup
    assert evaluation.enqueued and evaluation.status == "queued"
    outcome = services.evaluation_request(model=model, suites=[suite, suite], user=alice)
    assert outcome.created == [] and {e.pk for e in outcome.evaluations} == {evaluation.pk}
    assert Evaluation.objects.count() == 1


def test_store_twice_writes_one_set(setup) -> None:
    _, _, evaluation, results = setup
    packed = {"inline": results}
    assert tasks.store.apply(args=["suite", evaluation.pk, 1, packed]).get() is True
    assert tasks.store.apply(args=["suite", evaluation.pk, 1, packed]).get() is False
    evaluation.refresh_from_db()
    assert evaluation.status == "done"
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 2
    assert PredictionResult.objects.filter(evaluation=evaluation).count() == 1
    row = ItemResult.objects.get(evaluation=evaluation, item_number=1)
    verb = (
        [r["sum"] for r in results["sentences"][1]["regions"]][1],
        [r["sum"] for r in results["sentences"][0]["regions"]][1],
    )
    assert row.outcomes == [verb[0] > verb[1]]
    assert row.values["mismatch"]["sum"][1] == pytest.approx(verb[0])


def test_status_never_goes_backwards(setup) -> None:
    _, _, evaluation, results = setup
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=1, total=4)
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=3, total=4)
    services.progress_record(
        evaluation_id=evaluation.pk, attempt=1, done=2, total=4
    )  # late message
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("running", 3)
    services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=1, total=4)
    services.evaluation_fail(evaluation_id=evaluation.pk, attempt=1, reason="late failure")
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done, evaluation.error) == ("done", 4, "")


def test_a_redelivered_run_starts_its_progress_again(setup) -> None:
    _, _, evaluation, results = setup
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=0, total=4, restart=True)
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=3, total=4)
    # The worker dies; the message goes to another worker, which starts from the beginning.
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=0, total=4, restart=True)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("running", 0)
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=2, total=4)
    evaluation.refresh_from_db()
    assert evaluation.progress_done == 2
    services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    # A finished run is never restarted, nor is another attempt's.
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=0, total=4, restart=True)
    services.progress_record(evaluation_id=evaluation.pk, attempt=2, done=0, total=4, restart=True)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("done", 4)


def test_stale_attempt_is_ignored_after_retry(setup, alice) -> None:
    _, _, evaluation, results = setup
    services.evaluation_fail(evaluation_id=evaluation.pk, attempt=1, reason="GPU fell over")
    evaluation.refresh_from_db()
    assert evaluation.status == "failed" and evaluation.error == "GPU fell over"
    evaluation = runs.run_retry(run=evaluation, user=alice)
    assert (evaluation.status, evaluation.attempt, evaluation.error) == ("queued", 2, "")
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results) is False
    assert services.results_store(evaluation_id=evaluation.pk, attempt=2, results=results) is True


def test_changed_suite_gets_a_new_evaluation_and_old_is_outdated(setup, alice) -> None:
    suite, model, evaluation, results = setup
    services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    changed = small_suite("store me")
    changed["items"][0]["conditions"][0]["regions"][2]["content"] = "there."
    suite_services.suite_replace(suite=suite, user=alice, source=changed)
    evaluation.refresh_from_db()
    assert evaluation.outdated and evaluation.status == "done"
    outcome = services.evaluation_request(model=model, suites=[suite], user=alice)
    assert len(outcome.created) == 1 and outcome.created[0].pk != evaluation.pk
    assert Evaluation.objects.filter(suite=suite).count() == 2
    # The old results stay with the content they were computed on.
    assert evaluation.snapshot["items"][0]["conditions"][0]["regions"][2]["content"] == "here."
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 2


@pytest.mark.django_db(transaction=True)
def test_broker_down_is_a_clear_503_and_nothing_is_lost(tiny_gpt2, alice, alice_client) -> None:
    suite = suite_services.suite_import(source=small_suite("queued"), owner=alice).suite
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    with broker("redis://127.0.0.1:1/0"):
        response = alice_client.post_form(
            "/evaluations/new/", {"model": "tiny", "suites": [suite.name]}
        )
        assert response.status_code == 503
        assert "could not be reached" in response.content.decode()
        response = alice_client.post(
            "/api/evaluations/",
            json.dumps({"model": "tiny", "suites": [suite.name]}),
            content_type="application/json",
            HTTP_X_CSRFTOKEN=alice_client.csrf_token(),
        )
        assert response.status_code == 503
    assert Evaluation.objects.get().enqueued is False
    response = alice_client.post_form(
        "/evaluations/new/", {"model": "tiny", "suites": [suite.name]}
    )
    assert response.status_code == 302
    assert Evaluation.objects.get().enqueued is True


def test_run_scoring_output_shape(setup) -> None:
    _, _, evaluation, results = setup
    assert len(results["sentences"]) == 4
    first = results["sentences"][0]
    assert len(first["regions"]) == 3
    assert set(first["regions"][0]) == {"sum", "mean", "median", "range", "max", "min"}
    assert first["sentence"]["sum"] == pytest.approx(
        sum(r["sum"] for r in first["regions"]), abs=1e-4
    )
    json.dumps(results)  # travels through the broker as JSON


def test_a_run_killed_by_the_hard_time_limit_is_marked_failed(setup) -> None:
    """The worker's main process calls on_failure when the hard limit kills the pool
    process (the soft limit is the usual way out; this is for code that ignores it)."""
    from celery.exceptions import TimeLimitExceeded

    _, _, evaluation, _ = setup
    args = ["suite", evaluation.pk, 1, services.scoring_payload(evaluation)]
    with eager_tasks():  # run the fail task it sends, here
        tasks.work.on_failure(TimeLimitExceeded(7200), "task-id", args, {}, None)
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"
    assert "longer than this site's limit of 7200 s" in evaluation.error


def test_a_lost_worker_is_not_a_failure_but_any_other_final_exception_is(setup) -> None:
    """A lost worker's message goes back to the queue for another worker, so the run
    stays as it is; every other exception that escapes the task fails the run with it."""
    from billiard.exceptions import WorkerLostError

    _, _, evaluation, _ = setup
    args = ["suite", evaluation.pk, 1, services.scoring_payload(evaluation)]
    with eager_tasks():
        tasks.work.on_failure(WorkerLostError("gone"), "task-id", args, {}, None)
        evaluation.refresh_from_db()
        assert evaluation.status == "queued" and evaluation.error == ""
        tasks.work.on_failure(RuntimeError("disk full"), "task-id", args, {}, None)
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"
    assert "RuntimeError: disk full" in evaluation.error


def test_a_store_that_gives_up_fails_the_run_with_the_reason(setup) -> None:
    """After its retries, storing calls on_failure, which fails the run instead of
    leaving it running forever."""
    from django.db import OperationalError

    _, _, evaluation, results = setup
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=2, total=4)
    args = ["suite", evaluation.pk, 1, {"inline": results}]
    tasks.store.on_failure(OperationalError("database is locked"), "task-id", args, {}, None)
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"
    assert "could not be stored (OperationalError: database is locked)" in evaluation.error
    # A failure that could not be recorded by its own task is recorded with its reason.
    evaluation = runs.run_retry(run=evaluation, user=evaluation.requested_by)
    reason = ["suite", evaluation.pk, 2, "The model could not be loaded: gone"]
    tasks.fail.on_failure(OperationalError("database is locked"), "task-id", reason, {}, None)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.error) == ("failed", reason[3])
