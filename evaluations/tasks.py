"""Celery tasks of the run chain, the same for every kind of run (`evaluations.runs` holds
the kinds, the status machine and the services these tasks wrap).

1. request: a service (`services.evaluation_request` for suites) creates one run row
   per (model, benchmark, content) in one transaction: status `queued`, attempt 1.
2. enqueue: when that transaction commits, `runs.runs_enqueue` publishes
   `work(kind, run_id, attempt, payload)` on the `gpu` queue and marks the row
   `enqueued`. If the broker is down the row stays unsent, the request answers 503, and
   the periodic `sweep` sends it once the broker is back.
3. score: a GPU worker runs the kind's worker function on the payload (for suites,
   `worker.run_scoring`: sentences in, region surprisals out). It never touches the
   database. It reports `progress` to the default queue, best effort; the first report
   moves the run to `running`.
4. store: the worker hands its results to `store(kind, run_id, attempt, results)` on the
   default queue (through a file in `GYM_RUN_RESULTS_DIR` when the workers share a
   disk, so that no message is huge; in the message otherwise), which writes them in one
   transaction with the kind's store function and moves the run to `done`.
5. outcomes: for suites that transaction also derives the prediction outcomes and the
   accuracy (`evaluations.outcomes`).

Faults: a permanent error sends `fail` with its reason; a transient one retries with
back-off (scoring on a busy GPU; storing on a locked or unreachable database); any other
final exception, the hard time limit included, reaches `on_failure`, which records the
failure. A lost worker is not a failure: the broker hands its message to another
worker. Every message carries the run's attempt, so a message of an older attempt (a
retry happened since) or for a finished run changes nothing. `sweep` (every
`GYM_SWEEP_EVERY_SECONDS`, from celery beat) sends runs that never reached the broker
and fails runs that have been running longer than any worker may take."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from billiard.exceptions import WorkerLostError
from celery import Task, current_app, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery.signals import worker_process_init
from django.conf import settings
from django.db import InterfaceError
from django.db import OperationalError as DatabaseError
from kombu.exceptions import OperationalError as BrokerError

log = logging.getLogger(__name__)

GPU_QUEUE = "gpu"
DEFAULT_QUEUE = "celery"
# Publishing from a web request must fail fast when the broker is down, so that the
# request can say so.
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 1,
}
# A worker handing over results (or a failure) waits out a broker hiccup: losing the
# message would lose a run's work. About two minutes in all.
HANDOVER_RETRY_POLICY = {
    "max_retries": 15,
    "interval_start": 0.5,
    "interval_step": 2,
    "interval_max": 10,
}
# Database and broker errors that pass: storing and failing retry them with back-off.
TRANSIENT_STORE_ERRORS = (DatabaseError, InterfaceError, BrokerError, ConnectionError)
STORE_MAX_RETRIES = 8


@worker_process_init.connect
def import_work_functions(**_kwargs: Any) -> None:
    """A worker that takes work from the gpu queue imports the kinds' work functions
    (torch, the engine) when its pool process starts, not inside the first run: the
    import takes seconds that would count against that run's time limit, and a limit
    that strikes inside it leaves the module half-imported for every later run."""
    consumed = current_app.amqp.queues.consume_from
    if consumed and GPU_QUEUE not in consumed:
        return
    # The services modules register the kinds.
    from evaluations import probing_services, runs, services  # noqa: F401

    for kind in runs.KINDS.values():
        kind.work_function()


def soft_time_limit(hard: int) -> int:
    """A little before the hard limit, so that a run that is too long can say so itself
    instead of being killed without a word."""
    return max(hard - min(60, max(hard // 10, 1)), 1)


class TransientScoringError(Exception):
    """A failure worth retrying (out of memory on a busy GPU, a lost connection)."""


def enqueue_work(kind: str, run_id: int, attempt: int, payload: dict[str, Any]) -> None:
    """Publish a run's work. Its time limits travel in the message, from this site's
    settings at the time of the request, so every worker applies the same ones."""
    hard = settings.CELERY_TASK_HARD_TIME_LIMIT
    work.apply_async(
        args=[kind, run_id, attempt, payload],
        queue=GPU_QUEUE,
        time_limit=hard,
        soft_time_limit=soft_time_limit(hard),
        retry=True,
        retry_policy=PUBLISH_RETRY_POLICY,
        compression="zlib",
    )


def _hand_over(task: Any, *args: Any) -> None:
    task.apply_async(
        args=list(args),
        queue=DEFAULT_QUEUE,
        retry=True,
        retry_policy=HANDOVER_RETRY_POLICY,
        compression="zlib",
    )


def _report_progress(
    kind: str, run_id: int, attempt: int, done: int, total: int, restart: bool
) -> None:
    """Best effort: a broker hiccup costs a progress update, never the run."""
    try:
        progress.apply_async(
            args=[kind, run_id, attempt, done, total, restart],
            queue=DEFAULT_QUEUE,
            retry=False,
        )
    except Exception as exc:  # noqa: BLE001 - whatever the broker says, the run goes on
        log.warning("progress of %s run %s not reported: %s", kind, run_id, exc)


class WorkTask(Task):
    """Records every final failure of a run's work. The task body handles the usual ones
    (it sends `fail` with the reason); this catches what escapes it: the hard time limit,
    which kills the pool process (the worker's main process then calls this), and a
    failure to hand over the results. A lost worker is not a failure: its message goes
    to another worker."""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, WorkerLostError) or not isinstance(args, list | tuple) or len(args) < 3:
            return
        kind, run_id, attempt = args[0], args[1], args[2]
        limit = exc.args[0] if isinstance(exc, TimeLimitExceeded) and exc.args else None
        reason = failure_reason(exc, limit=int(limit) if isinstance(limit, int | float) else None)
        try:
            _hand_over(fail, kind, run_id, attempt, reason)
        except Exception:  # noqa: BLE001 - the sweep fails the run later, with a reason
            log.exception("could not record the failure of %s run %s", kind, run_id)


@shared_task(
    name="runs.work",
    base=WorkTask,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    # Defaults only: enqueue_work sets the limits of each message.
    time_limit=settings.CELERY_TASK_HARD_TIME_LIMIT,
    soft_time_limit=soft_time_limit(settings.CELERY_TASK_HARD_TIME_LIMIT),
)
def work(self: Any, kind: str, run_id: int, attempt: int, payload: dict[str, Any]) -> None:
    from evaluations import runs

    run_kind = runs.kind_named(kind)
    reporter = _Progress(kind, run_id, attempt)
    # A delivery starts from 0, also when it is a re-delivery after its worker died.
    reporter.start(payload)
    try:
        # Inside the try: importing torch takes seconds and counts against the time limit.
        results = run_kind.work_function()(payload, progress=reporter)
    except Exception as exc:
        transient = _is_transient(exc)
        if transient and self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
        if not transient:
            log.exception("%s run %s failed", kind, run_id)
        _hand_over(
            fail,
            kind,
            run_id,
            attempt,
            failure_reason(exc, retries=self.request.retries, limit=self.request.soft_time_limit),
        )
        return
    _hand_over(store, kind, run_id, attempt, results_pack(kind, run_id, attempt, results))


def retry_countdown(retries: int) -> int:
    """Seconds before the next try of a run's work: 4, 8, 16 ... at most 5 minutes, so a
    busy GPU gets time to free its memory."""
    return min(2 ** (retries + 2), 300)


class _Progress:
    """The worker function's progress callback: throttled to one message every
    GYM_PROGRESS_EVERY_SECONDS (the last one always goes), best effort. It also honours
    the test harness's pacing hook (GYM_RUN_HOLD_DIR)."""

    def __init__(self, kind: str, run_id: int, attempt: int) -> None:
        self.args = (kind, run_id, attempt)
        self.last = 0.0

    def start(self, payload: dict[str, Any]) -> None:
        total = len(payload.get("sentences") or ())
        _report_progress(*self.args, 0, total, True)
        self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= settings.GYM_PROGRESS_EVERY_SECONDS or done == total:
            self.last = now
            _report_progress(*self.args, done, total, False)
        if 0 < done < total:
            self._hold(done, total)

    def _hold(self, done: int, total: int) -> None:
        """While the file `hold` is in GYM_RUN_HOLD_DIR, wait here (after reporting where
        the run is), so that a test decides when a run is mid-flight instead of racing
        it. Unset in production; the soft time limit still interrupts the wait."""
        folder = settings.GYM_RUN_HOLD_DIR
        if not folder or not (Path(folder) / "hold").exists():
            return
        _report_progress(*self.args, done, total, False)
        while (Path(folder) / "hold").exists():
            time.sleep(0.05)


def results_pack(kind: str, run_id: int, attempt: int, results: dict[str, Any]) -> dict[str, Any]:
    """What travels to `store`: a reference to a file when the workers share a results
    folder (the embedded default: a 100,000-item suite gives a result of 100 MB, too big
    to be one message), else the results themselves."""
    folder = settings.GYM_RUN_RESULTS_DIR
    if not folder:
        return {"inline": results}
    Path(folder).mkdir(parents=True, exist_ok=True)
    name = f"{kind}-{run_id}-{attempt}-{uuid.uuid4().hex}.json"
    partial = Path(folder) / f".{name}.partial"
    with partial.open("w", encoding="utf-8") as out:
        json.dump(results, out, separators=(",", ":"))
        out.flush()
        os.fsync(out.fileno())
    # A reader never sees a half-written file: the name appears when the content is there.
    os.replace(partial, Path(folder) / name)
    return {"file": name}


def _results_path(packed: dict[str, Any]) -> Path | None:
    if "file" not in packed:
        return None
    # Only a bare file name inside the results folder, whatever the message says.
    return Path(settings.GYM_RUN_RESULTS_DIR) / Path(str(packed["file"])).name


def results_unpack(packed: dict[str, Any]) -> dict[str, Any] | None:
    """The results, or None when their file is gone (stored before: a re-delivery)."""
    path = _results_path(packed)
    if path is None:
        return packed["inline"]
    try:
        with path.open(encoding="utf-8") as data:
            return json.load(data)
    except FileNotFoundError:
        return None


def results_discard(packed: dict[str, Any]) -> None:
    path = _results_path(packed)
    if path is not None:
        path.unlink(missing_ok=True)


def results_prune(*, older_than_seconds: float) -> int:
    """Delete result files nobody stored (their message was lost with a broker folder);
    returns how many. Old enough that no pending store can still want them."""
    folder = settings.GYM_RUN_RESULTS_DIR
    if not folder or not Path(folder).is_dir():
        return 0
    cutoff = time.time() - older_than_seconds
    pruned = 0
    for path in Path(folder).iterdir():
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                pruned += 1
        except FileNotFoundError:
            continue
    return pruned


def failure_reason(exc: BaseException, *, retries: int = 0, limit: int | None = None) -> str:
    """What the run's page says about a run that failed for good."""
    if isinstance(exc, SoftTimeLimitExceeded | TimeLimitExceeded):
        # The same run on the same worker would take as long again.
        return (
            f"Scoring took longer than this site's limit of {limit or '?'} s per run and "
            "was stopped. Split the suite into smaller ones, or ask the site's administrator "
            "to raise CELERY_TASK_HARD_TIME_LIMIT (or to add a faster GPU worker)."
        )
    if isinstance(exc, BrokerError):
        return (
            "The worker finished but could not hand its results to the site (the task "
            f"queue was unreachable: {exc}). Retry the run."
        )
    # Only now: importing the engine imports torch, seconds that a run over time lacks.
    from evaluations.scoring.schema import ModelLoadError, ScoringError

    if isinstance(exc, ModelLoadError):
        # The model is not there; retrying will not make it appear.
        return f"The model could not be loaded: {exc}"
    if isinstance(exc, ScoringError):
        return f"Scoring failed: {exc}"
    if _is_transient(exc):
        return f"Gave up after {retries} retries: {exc.__class__.__name__}: {exc}"
    return f"Scoring failed: {exc.__class__.__name__}: {exc}"


def _is_transient(exc: BaseException) -> bool:
    """Worth retrying: out of memory (a busy GPU, CUDA included) or a lost connection."""
    return isinstance(exc, MemoryError | ConnectionError | TransientScoringError) or (
        exc.__class__.__name__ == "OutOfMemoryError"
    )


class StoreTask(Task):
    """Storing and failing retry transient errors with back-off (autoretry_for); when
    they give up, the run is failed here with the reason, never left running."""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, WorkerLostError) or not isinstance(args, list | tuple) or len(args) < 3:
            return
        from evaluations import runs

        kind, run_id, attempt = args[0], args[1], args[2]
        if self.name == fail.name and len(args) > 3:
            reason = str(args[3])  # recording the failure failed: record it from here
        else:
            reason = (
                f"The results could not be stored ({exc.__class__.__name__}: {exc}). Retry the run."
            )
        try:
            runs.run_fail(kind=runs.kind_named(kind), run_id=run_id, attempt=attempt, reason=reason)
        except Exception:  # noqa: BLE001 - the database is gone; the sweep fails it later
            log.exception("could not record the failure of %s run %s", kind, run_id)
        if self.name == store.name and len(args) > 3 and isinstance(args[3], dict):
            results_discard(args[3])


_STORE_OPTIONS: dict[str, Any] = {
    "bind": True,
    "base": StoreTask,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT_STORE_ERRORS,
    "max_retries": STORE_MAX_RETRIES,
    # 1, 2, 4 ... s, at most a minute, jittered so that a burst does not retry in step.
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "retry_jitter": True,
}


@shared_task(name="runs.store", **_STORE_OPTIONS)
def store(self: Any, kind: str, run_id: int, attempt: int, packed: dict[str, Any]) -> bool:
    from evaluations import runs

    run_kind = runs.kind_named(kind)
    results = results_unpack(packed)
    if results is None:
        # Stored and cleaned up by an earlier delivery, or lost with a disk: the run is
        # then finished, or it fails here with the reason.
        runs.run_fail(
            kind=run_kind,
            run_id=run_id,
            attempt=attempt,
            reason="The worker's results were lost before they could be stored. Retry the run.",
        )
        return False
    wrote = run_kind.store_function()(run_id=run_id, attempt=attempt, results=results)
    results_discard(packed)
    return wrote


@shared_task(name="runs.fail", **_STORE_OPTIONS)
def fail(self: Any, kind: str, run_id: int, attempt: int, reason: str) -> bool:
    from evaluations import runs

    return runs.run_fail(kind=runs.kind_named(kind), run_id=run_id, attempt=attempt, reason=reason)


@shared_task(name="runs.progress", ignore_result=True)
def progress(
    kind: str, run_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    from evaluations import runs

    try:
        runs.run_progress(
            kind=runs.kind_named(kind),
            run_id=run_id,
            attempt=attempt,
            done=done,
            total=total,
            restart=restart,
        )
    except (DatabaseError, InterfaceError) as exc:
        # Best effort: the next report, or the store, brings the row up to date.
        log.warning("progress of %s run %s not recorded: %s", kind, run_id, exc)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> None:
    from evaluations import runs

    runs.runs_sweep()
    # A week: far beyond any store's retries, short enough that lost files do not pile up.
    results_prune(older_than_seconds=7 * 24 * 3600)
