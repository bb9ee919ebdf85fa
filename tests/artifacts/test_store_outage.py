"""Work and uploads through an artifact store that cannot be reached: a real SeaweedFS
killed (SIGKILL, as a crashed machine) and started again on its data, no mock of the
storage API. The storing worker retries with back-off, fails the run with a reason that
says the store could not be reached and keeps the results; a model's check leaves the
model checking, for the sweep to send again."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from evaluations.models import Evaluation, LanguageModel
from evaluations.runs import tasks
from evaluations.syntaxgym import services
from gym import object_store
from suites.syntaxgym import services as suite_services
from tests.artifacts.conftest import s3_settings
from tests.conftest import small_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(tmp_path: Path) -> Iterator[object_store.ObjectStore]:
    """A store of this test's own, killed and started again by it."""
    started = object_store.start(tmp_path / "seaweed")
    with override_settings(
        **s3_settings(started, "outage"),
        GYM_RUN_RESULTS_DIR="",
        GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache",
    ):
        holder = [started]
        yield holder  # type: ignore[misc]
        holder[-1].stop()


def _restart(holder: list[object_store.ObjectStore], tmp_path: Path) -> None:
    port = int(holder[-1].endpoint.rsplit(":", 1)[1])
    holder.append(object_store.start(tmp_path / "seaweed", port=port))


def test_a_store_outage_while_storing_is_retried_said_and_keeps_the_results(
    store, tmp_path: Path, alice, monkeypatch
) -> None:
    suite = suite_services.suite_import(source=small_suite("outage"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    run = services.evaluation_request(model=model, suites=[suite]).evaluations[0]
    # The GPU worker handed its results over through the store: a key in the message.
    packed = tasks.results_pack("suite", run.pk, run.attempt, {"sentences": [1, 2]})
    assert set(packed) == {"key"}
    store[-1].stop(kill=True)
    # Fewer tries than in production, to keep the test short; each meets the dead store.
    monkeypatch.setattr(tasks.store, "max_retries", 2)
    tasks.store.apply(args=["suite", run.pk, run.attempt, packed])
    run = Evaluation.objects.get(pk=run.pk)
    assert run.status == "failed"
    assert run.error.startswith("The results could not be stored. The artifact store at s3://")
    assert "could not be reached" in run.error
    # Retried with back-off before it gave up (once at first, then each retry).
    assert run.error.endswith(
        "(tried 3 times). Nothing was lost: the site sends the run again once the store is "
        "back (or retry it then)."
    )
    # Marked for the sweep, which sends it again once the store answers.
    assert run.waiting_for_store and run.store_resends == 0
    # The store back: the results are still there, not deleted by the failure.
    _restart(store, tmp_path)
    assert tasks.results_unpack(packed) == {"sentences": [1, 2]}


def test_a_workers_write_waits_for_the_store_to_come_back(store, tmp_path: Path) -> None:
    """What a GPU worker made (results, a checkpoint) is written patiently: a store that
    is down when the work ends costs a pause, not the work."""
    from gym import artifacts

    store[-1].stop(kill=True)
    waits: list[float] = []
    tries: list[int] = []

    def put() -> None:
        tries.append(1)
        if len(tries) == 3:  # the store comes back between the second and third try
            _restart(store, tmp_path)
        artifacts.put_file("results/late.json", io.BytesIO(b'{"x": 1}'))

    artifacts.patiently(put, what="late results", patience=600, sleep=waits.append)
    assert len(tries) == 3 and waits == [1.0, 2.0]  # backed off, each failure a real one
    assert b"".join(artifacts.stream("results/late.json")) == b'{"x": 1}'

    # Past its patience the write fails, saying what and for how long it tried.
    store[-1].stop(kill=True)
    with pytest.raises(artifacts.StoreUnavailable) as raised:
        artifacts.patiently(put, what="late results", patience=0.5, sleep=lambda s: None)
    message = str(raised.value)
    assert "could not be reached" in message and "(writing late results: tried " in message
    assert message.endswith("times over 0.5 s)")
    # No patience at all (GYM_STORE_WRITE_PATIENCE=0): one try, the store's own message.
    with (
        override_settings(GYM_STORE_WRITE_PATIENCE=0),
        pytest.raises(artifacts.StoreUnavailable) as raised,
    ):
        tasks.results_pack("suite", 1, 1, {"sentences": []})
    assert "writing" not in str(raised.value)


def _outage_reason() -> str:
    from gym.artifacts import StoreUnavailable

    down = StoreUnavailable("The artifact store at s3://gym/outage could not be reached: x")
    return tasks.failure_reason(down, retries=5, kind="suite")


def test_a_run_failed_for_an_outage_is_sent_again_once_the_store_answers(
    store, tmp_path: Path, alice, _private_broker
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from evaluations.runs import lifecycle

    suite = suite_services.suite_import(source=small_suite("outage"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="M", source="/models/m")
    run = services.evaluation_request(model=model, suites=[suite]).evaluations[0]
    kind = lifecycle.kind_of(run)
    other = services.evaluation_request(
        model=LanguageModel.objects.create(name="n", display_name="N", source="/models/n"),
        suites=[suite],
    ).evaluations[0]
    # Any other failure is not waiting for anything.
    lifecycle.run_fail(kind=kind, run_id=other.pk, attempt=1, reason="The work failed: x")
    lifecycle.run_fail(kind=kind, run_id=run.pk, attempt=1, reason=_outage_reason())
    run.refresh_from_db()
    other.refresh_from_db()
    assert run.waiting_for_store and not other.waiting_for_store
    later = timezone.now() + timedelta(minutes=5)

    # The store still down: the sweep leaves the run failed.
    store[-1].stop(kill=True)
    assert lifecycle.runs_sweep(now=later).store_resent == 0
    run.refresh_from_db()
    assert (run.status, run.attempt, run.waiting_for_store) == ("failed", 1, True)

    # Back: the run is queued again as a new attempt, and sent.
    _restart(store, tmp_path)
    assert lifecycle.runs_sweep(now=later).store_resent == 1
    run.refresh_from_db()
    assert (run.status, run.attempt, run.enqueued) == ("queued", 2, True)
    assert (run.waiting_for_store, run.store_resends, run.error) == (False, 1, "")
    assert _private_broker("gpu") >= 1
    other.refresh_from_db()
    assert (other.status, other.attempt) == ("failed", 1)

    # At most GYM_STORE_OUTAGE_RESENDS times: then it stays failed, saying so.
    lifecycle.run_advance(kind, run.pk, 2, "running")
    lifecycle.run_fail(kind=kind, run_id=run.pk, attempt=2, reason=_outage_reason())
    with override_settings(GYM_STORE_OUTAGE_RESENDS=1):
        assert lifecycle.runs_sweep(now=later).store_resent == 0
    run.refresh_from_db()
    assert (run.status, run.attempt, run.waiting_for_store) == ("failed", 2, False)
    assert run.error.endswith(
        "It was sent again 1 time(s) after outages of the store, the most this site "
        "allows: retry it once the store is back."
    )
    # A person's retry still works, and the automatic resends count afresh.
    lifecycle.run_retry(run=run, user=alice)
    run.refresh_from_db()
    assert (run.status, run.attempt, run.waiting_for_store, run.store_resends) == (
        "queued",
        3,
        False,
        0,
    )


def test_a_check_that_meets_a_dead_store_leaves_the_model_checking(
    store, tmp_path: Path, alice, monkeypatch
) -> None:
    from celery import current_app

    from evaluations.language_models import checks
    from evaluations.language_models import tasks as check_tasks

    model = LanguageModel.objects.create(
        name="up",
        display_name="Up",
        source="artifact:models/uploaded/" + "0" * 64,
        content_hash="0" * 64,
        status=LanguageModel.Status.CHECKING,
        registered_by=alice,
    )
    store[-1].stop(kill=True)
    monkeypatch.setattr(check_tasks.check, "max_retries", 0)
    # The verdict's hand-over runs here too, not through a broker.
    current_app.conf.task_always_eager = True
    try:
        check_tasks.check.apply(args=(model.pk, model.source, "causal"))
    finally:
        current_app.conf.task_always_eager = False
    model.refresh_from_db()
    # No verdict: still checking, saying why, and unsent so that the sweep sends it again.
    assert model.status == LanguageModel.Status.CHECKING
    assert "could not be reached" in model.reason
    assert model.reason.endswith(checks.STORE_DOWN_NOTE)
    assert model.check_sent_at is None


def test_a_model_refused_for_an_outage_does_not_block_its_upload(alice, bob) -> None:
    from evaluations.language_models import uploads

    def refused(owner) -> LanguageModel:
        return LanguageModel.objects.create(
            name=f"old-{owner.username}",
            display_name="Old",
            source="artifact:models/uploaded/x",
            content_hash="1" * 64,
            status=LanguageModel.Status.REFUSED,
            reason="The model cannot run: The artifact store at s3://gym could not be reached",
            registered_by=owner,
        )

    mine = refused(alice)
    uploads._uploaded_before("1" * 64, alice)  # no refusal: the upload goes on
    assert not LanguageModel.objects.filter(pk=mine.pk).exists()
    theirs = refused(bob)
    with pytest.raises(uploads.ModelUploadRefused):
        uploads._uploaded_before("1" * 64, alice)
    theirs.refresh_from_db()
    assert (theirs.status, theirs.check_sent_at) == (LanguageModel.Status.CHECKING, None)
