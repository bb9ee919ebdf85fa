"""The run lifecycle, once for every kind of run (suites now; minimal pairs and probing
tasks later): the kinds registry, the status machine, enqueueing, progress, failure,
cancel, retry and the sweep. A kind brings its run model (a subclass of
`evaluations.models.Run`), a payload builder, a worker function and a store function;
everything here works on any of them. The Celery side is in `evaluations.tasks`.

A kind is registered at import of its services module (`register(RunKind(...))`), which
its app's `ready()` imports, so that every process knows every kind."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from evaluations.model_sources import public_error
from evaluations.models import Run
from gym.errors import ApplicationError

log = logging.getLogger(__name__)

S = Run.Status
# From which states each state may be entered: the status machine never goes backwards
# (a retry, which starts a new attempt, is the one way back).
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    S.RUNNING: (S.QUEUED, S.RUNNING),
    S.DONE: (S.QUEUED, S.RUNNING),
    S.FAILED: (S.QUEUED, S.RUNNING),
    S.CANCELLED: (S.QUEUED, S.RUNNING),
}


class BrokerUnavailable(ApplicationError):
    """The task queue could not be reached. The runs were recorded; the sweep sends them
    once the broker is back, and asking again sends them at once."""

    status_code = 503
    code = "broker_unavailable"


class RunConflict(ApplicationError):
    """The run is not in a state where the asked action means anything (e.g. retrying a
    run that is done)."""

    status_code = 409
    code = "conflict"


@dataclass(frozen=True)
class RunKind:
    """One kind of run. Callables are dotted paths, imported when first used, so that
    registering a kind imports neither torch (worker side) nor the services (web side).

    - model: "app_label.ModelName" of a `Run` subclass.
    - payload: (run) -> dict, everything the worker needs (JSON; it never reads the
      database). Built on the web side.
    - work: (payload, progress) -> results dict, run on a GPU worker; progress(done, total)
      may be called any number of times.
    - store: (*, run_id, attempt, results) -> bool, one transaction on the default queue;
      returns False when the run was finished or the attempt is stale (nothing written).
    """

    name: str
    model: str
    payload: str
    work: str
    store: str

    @cached_property
    def run_model(self) -> type[Run]:
        return apps.get_model(self.model)

    def build_payload(self, run: Run) -> dict[str, Any]:
        return import_string(self.payload)(run)

    def work_function(self) -> Callable[..., dict[str, Any]]:
        return import_string(self.work)

    def store_function(self) -> Callable[..., bool]:
        return import_string(self.store)


KINDS: dict[str, RunKind] = {}


def register(kind: RunKind) -> None:
    KINDS[kind.name] = kind


def kind_named(name: str) -> RunKind:
    try:
        return KINDS[name]
    except KeyError:
        raise LookupError(f"no run kind {name!r}; known: {sorted(KINDS)}") from None


def kind_of(run: Run) -> RunKind:
    for kind in KINDS.values():
        if isinstance(run, kind.run_model):
            return kind
    raise LookupError(f"{run.__class__.__name__} is not a registered run kind")


def run_advance(kind: RunKind, run_id: int, attempt: int, to: str, **fields: Any) -> bool:
    """Move to `to` if allowed from the current state (a conditional update, so two
    workers can never both do it); False when the message is stale."""
    count = kind.run_model.objects.filter(
        pk=run_id, attempt=attempt, status__in=ALLOWED_FROM[to]
    ).update(status=to, **fields)
    return count == 1


def run_progress(
    *, kind: RunKind, run_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    """Record progress and mark the run as started. Within one delivery progress only
    grows (a late message changes nothing); `restart` is the first message of a delivery,
    which starts again from `done` when a worker died and the message went to another
    one: its clock for the sweep starts again too."""
    now = timezone.now()
    runs = kind.run_model.objects.filter(pk=run_id, attempt=attempt)
    runs.filter(status=S.QUEUED).update(status=S.RUNNING, started_at=now)
    running = runs.filter(status=S.RUNNING)
    if restart:
        # A kind whose worker cannot count its work up front sends 0: keep the request's.
        fields: dict[str, Any] = {"progress_total": total} if total else {}
        running.update(progress_done=done, started_at=now, **fields)
    else:
        running.filter(progress_done__lt=done).update(progress_done=done, progress_total=total)


def run_fail(*, kind: RunKind, run_id: int, attempt: int, reason: str) -> bool:
    # Everyone may read the reason: no server paths in it.
    reason = public_error(reason)
    return run_advance(
        kind, run_id, attempt, S.FAILED, error=reason[:5000], finished_at=timezone.now()
    )


def runs_enqueue(*, kind: RunKind, runs: Sequence[Run]) -> None:
    """Publish the runs' work on the gpu queue and mark them sent. Call it only after the
    rows are committed (a worker must never see a row that is not there): see
    `runs_enqueue_on_commit`.

    Raises BrokerUnavailable when some could not be published; they stay queued and
    unsent, for the sweep or the next request."""
    from evaluations import tasks

    failed = 0
    for run in runs:
        if failed:
            # The broker is down: the others would wait out the same timeouts for nothing.
            failed += 1
            continue
        try:
            tasks.enqueue_work(kind.name, run.pk, run.attempt, kind.build_payload(run))
        except Exception as exc:  # noqa: BLE001 - any broker failure is reported the same way
            log.warning("could not enqueue %s run %s: %s", kind.name, run.pk, exc)
            failed += 1
            continue
        kind.run_model.objects.filter(pk=run.pk, attempt=run.attempt).update(enqueued=True)
        run.enqueued = True
    if failed:
        raise BrokerUnavailable(
            f"The task queue could not be reached, so {failed} run(s) are recorded but not "
            "yet sent to a worker. Nothing was lost: they are sent as soon as the queue is "
            "back, or when you ask again."
        )


def runs_enqueue_on_commit(*, kind: RunKind, runs: Sequence[Run]) -> None:
    """Enqueue once the current transaction commits (at once when there is none). A
    BrokerUnavailable raised then propagates from the outermost `atomic` block, after
    the rows are committed, so a view that called the service can still answer 503."""
    pending = [r for r in runs if r.status == S.QUEUED and not r.enqueued]
    if pending:
        transaction.on_commit(lambda: runs_enqueue(kind=kind, runs=pending))


def _check_may_manage(run: Run, user: Any, action: str) -> None:
    if not run.may_manage(user):
        raise PermissionDenied(
            f"Only the benchmark's owner, the person who requested this run, or staff may "
            f"{action} it."
        )


def run_retry(*, run: Run, user: Any) -> Run:
    """Send a failed or cancelled run again as a new attempt (a late result of the old
    attempt is then ignored); send a run that never reached the broker. Anything else is
    a RunConflict: nothing happens silently."""
    _check_may_manage(run, user, "retry")
    kind = kind_of(run)
    with transaction.atomic():
        updated = kind.run_model.objects.filter(
            pk=run.pk, status__in=(S.FAILED, S.CANCELLED)
        ).update(
            status=S.QUEUED,
            enqueued=False,
            attempt=F("attempt") + 1,
            error="",
            progress_done=0,
            queued_at=timezone.now(),
            started_at=None,
            finished_at=None,
        )
        run.refresh_from_db()
        if not updated and not run.waiting_for_broker:
            raise RunConflict(_not_retryable(run))
        runs_enqueue_on_commit(kind=kind, runs=[run])
    return run


def _not_retryable(run: Run) -> str:
    if run.status == S.DONE:
        return "This run is done; there is nothing to retry."
    if run.status == S.RUNNING:
        return "This run is running; cancel it first if it is stuck, then retry."
    return "This run is queued and already sent to a worker; it starts when one is free."


def run_cancel(*, run: Run, user: Any) -> Run:
    """Stop a queued or running run. A worker that is already computing it finishes its
    batch of work, but its results are refused (the status machine never leaves
    `cancelled` except by a retry)."""
    _check_may_manage(run, user, "cancel")
    kind = kind_of(run)
    who = getattr(user, "username", "") or "someone"
    cancelled = run_advance(
        kind,
        run.pk,
        run.attempt,
        S.CANCELLED,
        error=f"Cancelled by {who}.",
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    if not cancelled:
        raise RunConflict(
            f"This run is {run.status}; only queued or running runs can be cancelled."
        )
    return run


@dataclass
class SweepReport:
    resent: int = 0
    unsent: int = 0
    failed: int = 0


def stale_reason(seconds: int) -> str:
    return (
        f"No worker finished this run within {seconds} s of its start (the site's time "
        "limit per run, plus the time a broker takes to hand the work of a lost worker to "
        "another one): its worker stopped or lost its results. Retry it."
    )


def runs_sweep(*, now: Any = None) -> SweepReport:
    """Heal what should have moved without anybody asking: send runs that are queued but
    never reached the broker (it was down), and fail runs that have been running longer
    than any worker may take. Safe to run at any time and from several places."""
    now = now or timezone.now()
    report = SweepReport()
    resend_before = now - timedelta(seconds=settings.GYM_SWEEP_RESEND_AFTER)
    stale_before = now - timedelta(seconds=settings.GYM_RUN_STALE_AFTER)
    for kind in KINDS.values():
        objects = kind.run_model.objects
        unsent = list(
            objects.filter(status=S.QUEUED, enqueued=False, queued_at__lt=resend_before).order_by(
                "queued_at"
            )
        )
        if unsent:
            try:
                runs_enqueue(kind=kind, runs=unsent)
            except BrokerUnavailable:
                pass
            sent = sum(1 for r in unsent if r.enqueued)
            report.resent += sent
            report.unsent += len(unsent) - sent
        for run_id, attempt in objects.filter(
            status=S.RUNNING, started_at__lt=stale_before
        ).values_list("pk", "attempt"):
            if run_fail(
                kind=kind,
                run_id=run_id,
                attempt=attempt,
                reason=stale_reason(settings.GYM_RUN_STALE_AFTER),
            ):
                report.failed += 1
    if report.resent or report.failed or report.unsent:
        log.info("sweep: %s", report)
    return report
