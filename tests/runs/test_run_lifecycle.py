"""The run lifecycle without a worker: who may cancel and retry, what retry and cancel do
in every state, the sweep that heals runs nobody asks about, and the page that says a
run waits for the broker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from evaluations.models import Evaluation, LanguageModel
from evaluations.runs import lifecycle as runs
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import broker, wait_for_log
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation(alice, bob) -> Evaluation:
    """Alice's suite; bob asked for the run. Not sent to the broker (no commit here)."""
    suite = suite_services.suite_import(source=small_suite("owned by alice"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    return services.evaluation_request(model=model, suites=[suite], user=bob).evaluations[0]


def _api_post(client, path: str):
    return client.post(
        path, "{}", content_type="application/json", HTTP_X_CSRFTOKEN=client.csrf_token()
    )


def test_only_owner_requester_or_staff_may_cancel_or_retry(
    evaluation, charlie_client, alice_client, bob_client, dana_client
) -> None:
    services.evaluation_fail(evaluation_id=evaluation.pk, attempt=1, reason="GPU fell over")
    # Somebody else: refused, on the API and on the page, and nothing changes.
    assert _api_post(charlie_client, f"/api/evaluations/{evaluation.pk}/retry/").status_code == 403
    assert charlie_client.post_form(f"/evaluations/{evaluation.pk}/retry/").status_code == 403
    assert "Retry" not in charlie_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempt) == ("failed", 1)
    # The requester, the suite's owner and staff may.
    page = bob_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert "Retry" in page
    response = _api_post(bob_client, f"/api/evaluations/{evaluation.pk}/retry/")
    assert response.status_code == 200 and response.json()["attempt"] == 2
    assert _api_post(charlie_client, f"/api/evaluations/{evaluation.pk}/cancel/").status_code == 403
    response = _api_post(alice_client, f"/api/evaluations/{evaluation.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert "Cancelled by alice" in response.json()["error"]
    response = dana_client.post_form(f"/evaluations/{evaluation.pk}/retry/")
    assert response.status_code == 302
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempt) == ("queued", 3)


def test_retry_and_cancel_answer_a_conflict_when_there_is_nothing_to_do(
    evaluation, bob_client
) -> None:
    pk = evaluation.pk
    Evaluation.objects.filter(pk=pk).update(enqueued=True)
    queued = _api_post(bob_client, f"/api/evaluations/{pk}/retry/")
    assert queued.status_code == 409 and "already sent" in queued.json()["errors"][0]["message"]
    services.progress_record(evaluation_id=pk, attempt=1, done=1, total=4)
    running = _api_post(bob_client, f"/api/evaluations/{pk}/retry/")
    assert (
        running.status_code == 409 and "cancel it first" in running.json()["errors"][0]["message"]
    )
    Evaluation.objects.filter(pk=pk).update(status="done")
    done = _api_post(bob_client, f"/api/evaluations/{pk}/retry/")
    assert done.status_code == 409 and "done" in done.json()["errors"][0]["message"]
    cancel = _api_post(bob_client, f"/api/evaluations/{pk}/cancel/")
    assert cancel.status_code == 409
    # The page says so too, instead of "Sent again".
    page = bob_client.post_form(f"/evaluations/{pk}/retry/", follow=True).content.decode()
    assert "nothing to retry" in page and "Sent again" not in page
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.attempt) == ("done", 1)


def test_a_cancelled_run_refuses_its_results_until_retried(evaluation, bob) -> None:
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=2, total=4)
    runs.run_cancel(run=evaluation, user=bob)
    results: dict[str, Any] = {"sentences": [{"regions": [], "sentence": {}}] * 4}
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results) is False
    services.progress_record(evaluation_id=evaluation.pk, attempt=1, done=3, total=4)
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.progress_done) == ("cancelled", 2)
    assert evaluation.finished_at is not None
    evaluation = runs.run_retry(run=evaluation, user=bob)
    assert (evaluation.status, evaluation.attempt, evaluation.error) == ("queued", 2, "")


def test_the_page_says_when_a_run_waits_for_the_broker(evaluation, bob_client) -> None:
    waiting = "waiting for the task queue"
    page = bob_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert evaluation.enqueued is False
    assert waiting in page and "data-waiting hidden" not in page
    assert "Send again" in page
    api = bob_client.get(f"/api/evaluations/{evaluation.pk}/").json()
    assert api["enqueued"] is False
    Evaluation.objects.filter(pk=evaluation.pk).update(enqueued=True)
    page = bob_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert "data-waiting hidden" in page and "Send again" not in page


@pytest.mark.django_db(transaction=True)
def test_the_sweep_sends_what_never_reached_the_broker_and_fails_stale_runs(
    alice, bob, settings
) -> None:
    suites = [
        suite_services.suite_import(source=small_suite(f"sweep {n}"), owner=alice).suite
        for n in range(3)
    ]
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    with broker("redis://127.0.0.1:1/0"):  # nothing listens there
        with pytest.raises(services.BrokerUnavailable):
            services.evaluation_request(model=model, suites=suites, user=bob)
    unsent, running, fresh = Evaluation.objects.order_by("pk")
    assert not any(e.enqueued for e in (unsent, running, fresh))
    now = timezone.now()
    Evaluation.objects.filter(pk=unsent.pk).update(queued_at=now - timedelta(minutes=5))
    Evaluation.objects.filter(pk__in=[running.pk, fresh.pk]).update(enqueued=True)
    services.progress_record(evaluation_id=running.pk, attempt=1, done=1, total=4)
    services.progress_record(evaluation_id=fresh.pk, attempt=1, done=1, total=4)
    Evaluation.objects.filter(pk=running.pk).update(
        started_at=now - timedelta(seconds=settings.GYM_RUN_STALE_AFTER + 1)
    )

    # While the broker is still down the sweep sends nothing and says so.
    with broker("redis://127.0.0.1:1/0"):
        report = runs.runs_sweep(now=now)
    assert (report.resent, report.unsent, report.failed) == (0, 1, 1)
    # Once it is back, the unsent run goes out; nothing else moves.
    report = runs.runs_sweep(now=now)
    assert (report.resent, report.unsent, report.failed) == (1, 0, 0)
    for evaluation in (unsent, running, fresh):
        evaluation.refresh_from_db()
    assert unsent.enqueued and unsent.status == "queued"
    assert running.status == "failed" and "No worker finished this run" in running.error
    assert fresh.status == "running"
    # A queued run that is younger than GYM_SWEEP_RESEND_AFTER is left to its request.
    Evaluation.objects.filter(pk=unsent.pk).update(enqueued=False, queued_at=now)
    assert runs.runs_sweep(now=now).resent == 0


def test_the_sweep_is_scheduled() -> None:
    from evaluations.runs import tasks
    from gym.celery import app as celery_app

    entry = celery_app.conf.beat_schedule["sweep runs"]
    assert entry["task"] == tasks.sweep.name == "runs.sweep"
    # Dropped when not taken within its period, so that slow sweeps never pile up.
    assert entry["options"] == {"expires": entry["schedule"]}


def test_every_kind_is_registered_with_importable_parts() -> None:
    kind = runs.kind_named("suite")
    assert kind.run_model is Evaluation
    assert callable(kind.store_function())
    with pytest.raises(LookupError):
        runs.kind_named("no such kind")


def test_the_sweep_prunes_result_files_nobody_stored(tmp_path, settings) -> None:
    import os
    import time

    from evaluations.runs import tasks

    settings.GYM_RUN_RESULTS_DIR = str(tmp_path)
    old = tasks.results_pack("suite", 1, 1, {"sentences": []})
    new = tasks.results_pack("suite", 2, 1, {"sentences": []})
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(tmp_path / old["file"], (week_ago, week_ago))
    assert tasks.results_prune(older_than_seconds=7 * 24 * 3600) == 1
    assert tasks.results_unpack(old) is None
    assert tasks.results_unpack(new) == {"sentences": []}


def test_results_travel_through_the_artifact_store_without_a_shared_folder(settings) -> None:
    """Many machines share no results folder: with an object store configured the results
    go through it, by key, and are deleted once stored."""
    from evaluations.runs import tasks
    from gym import artifacts

    settings.GYM_RUN_RESULTS_DIR = ""
    settings.GYM_ARTIFACTS_URL = "s3://gym/site"
    packed = tasks.results_pack("suite", 7, 2, {"sentences": [1, 2]})
    assert set(packed) == {"key"} and packed["key"].startswith("results/suite-7-2-")
    assert artifacts.exists(packed["key"])
    assert tasks.results_unpack(packed) == {"sentences": [1, 2]}
    # A message naming something outside results/ reads only under results/.
    assert tasks.results_unpack({"key": "corpora/../../etc/passwd"}) is None
    tasks.results_discard(packed)
    assert tasks.results_unpack(packed) is None  # stored before: a re-delivery
    settings.GYM_ARTIFACTS_URL = ""
    assert tasks.results_pack("suite", 7, 2, {"x": 1}) == {"inline": {"x": 1}}


def test_an_unreachable_store_is_retried_then_said() -> None:
    from evaluations.runs.tasks import failure_reason, is_transient
    from gym.artifacts import StoreUnavailable

    down = StoreUnavailable(
        "The artifact store at s3://gym (http://s3:8333) could not be reached: x"
    )
    assert is_transient(down)
    reason = failure_reason(down, retries=5, kind="training")
    assert reason.startswith("The artifact store at s3://gym (http://s3:8333) could not be")
    assert reason.endswith(
        "(tried 6 times). Nothing was lost: the site sends the run again once the store is "
        "back (or retry it then)."
    )
    # A worker's write that waited for the store already says how often it tried.
    waited = StoreUnavailable(
        "The artifact store at s3://gym could not be reached: x (writing the results of "
        "suite run 5: tried 7 times over 120 s)"
    )
    assert failure_reason(waited, kind="suite") == (
        f"{waited}. Nothing was lost: the site sends the run again once the store is back "
        "(or retry it then)."
    )


@pytest.mark.django_db(transaction=True)
def test_work_is_published_only_when_the_rows_are_committed(alice, _private_broker) -> None:
    from django.db import transaction

    def published() -> int:
        return _private_broker("gpu")

    suite = suite_services.suite_import(source=small_suite("on commit"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    before = published()
    with transaction.atomic():  # a caller's own transaction around the service
        evaluation = services.evaluation_request(model=model, suites=[suite]).evaluations[0]
        assert published() == before  # a worker could not see the row yet
    assert published() == before + 1
    evaluation.refresh_from_db()
    assert evaluation.enqueued


def test_a_run_over_the_time_limit_is_told_in_its_own_kind_s_words() -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    from evaluations.runs.tasks import failure_reason

    suite = failure_reason(SoftTimeLimitExceeded(), limit=600, kind="suite")
    assert suite.startswith("Scoring took longer than this site's limit of 600 s")
    assert "Split the suite" in suite and "GYM_PACK_TOKEN_BUDGET" in suite
    probing = failure_reason(SoftTimeLimitExceeded(), limit=600, kind="probing")
    assert probing.startswith("Probing took longer than this site's limit of 600 s")
    assert "suite" not in probing and "GYM_PACK_TOKEN_BUDGET" not in probing
    # Minimal pairs are packed into tasks too: a smaller budget shortens them as well.
    pairs_late = failure_reason(SoftTimeLimitExceeded(), limit=600, kind="pairs")
    assert "Split the minimal-pair set" in pairs_late and "GYM_PACK_TOKEN_BUDGET" in pairs_late
    pairs = failure_reason(ValueError("bad input"), kind="pairs")
    assert pairs == "Scoring failed: ValueError: bad input"
    assert failure_reason(ValueError("x"), kind="probing") == "Probing failed: ValueError: x"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_sweeps_not_taken_within_their_period_are_dropped(redis_broker, workers) -> None:
    """A storing worker that was busy (here: not yet started) finds a backlog of sweeps:
    the ones past their period are dropped, not run one after another in front of the
    progress and results queued behind them."""
    import time

    from evaluations.runs import tasks

    for _ in range(5):
        tasks.sweep.apply_async(expires=1)
    time.sleep(2)
    tasks.sweep.apply_async(expires=600)
    storing = workers("celery")
    wait_for_log(storing, "succeeded", timeout=120)
    time.sleep(1)
    log = storing.log.read_text()
    assert log.count(" succeeded in ") == 1, log[-3000:]
    assert log.count("expired") + log.count("Discarding revoked task") >= 5, log[-3000:]
