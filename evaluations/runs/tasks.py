"""Celery tasks of the run chain, the same for every kind of run (`evaluations.runs.lifecycle` holds
the kinds, the status machine and the services these tasks wrap).

1. request: a service (`services.evaluation_request` for suites) creates one run row
   per (model, benchmark, content) in one transaction: status `queued`, attempt 1.
2. enqueue: when that transaction commits, `runs.runs_enqueue` publishes
   `work(kind, run_id, attempt, payload)` on the `gpu` queue and marks the row
   `enqueued`. If the broker is down the row stays unsent, the request answers 503, and
   the periodic `sweep` sends it once the broker is back.
   A kind that packs (suites) is sent instead as `work_pack(kind, entries, payload)`
   tasks of about GYM_PACK_TOKEN_BUDGET tokens each (`evaluations.runs.packing`): small runs
   share one task and one engine call, a large run is split into parts across tasks.
3. score: a GPU worker runs the kind's worker function on the payload (for suites,
   `worker.run_scoring`: sentences in, region surprisals out). It never touches the
   database. It reports `progress` to the default queue, best effort; the first report
   moves the run to `running`. Between batches it also asks the broker, at most every
   GYM_CANCEL_CHECK_EVERY_SECONDS, whether its runs were cancelled; when all of them
   were, the work stops there (`RunCancelled`), nothing is stored, and the message is
   acknowledged, so the worker takes the next one.
4. store: the worker hands its results to `store(kind, run_id, attempt, results)` on the
   default queue (through a file in `GYM_RUN_RESULTS_DIR` when the workers share a
   disk, so that no message is huge; in the message otherwise), which writes them with
   the kind's store function and moves the run to `done`, all at once for readers (in
   one transaction; a suite's on SQLite in several short ones, the run done in the last,
   so that the site's writes are not locked out meanwhile). A packed
   task hands each of its parts to `store_part` in a message of its own: a run in one
   part is stored at once, a split run's parts wait in `RunPart` rows until its last
   part arrives (`runs.run_part_store`); each part is stored once.
5. outcomes: for suites that transaction also derives the prediction outcomes and the
   accuracy (`evaluations.syntaxgym.outcomes`).

Faults: a permanent error sends `fail` with its reason; a transient one retries with
back-off (scoring on a busy GPU; storing on a locked or unreachable database); any other
final exception, the hard time limit included, reaches `on_failure`, which records the
failure. A lost worker is not a failure: the broker hands its message to another
worker. Every message carries the run's attempt, so a message of an older attempt (a
retry happened since) or for a finished run changes nothing. `sweep` (every
`GYM_SWEEP_EVERY_SECONDS`, from celery beat) sends runs that never reached the broker
and fails runs that have been running longer than any worker may take."""

from __future__ import annotations

import io
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from billiard.exceptions import WorkerLostError
from celery import Task, current_app, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery.signals import worker_init, worker_process_init
from django.conf import settings
from django.db import InterfaceError
from django.db import OperationalError as DatabaseError
from django.utils.module_loading import import_string
from kombu.exceptions import OperationalError as BrokerError

from evaluations.runs import broker_watch
from evaluations.runs.publish import (
    DEFAULT_QUEUE,
    GPU_QUEUE,
    HANDOVER_RETRY_POLICY,
    STORE_OUTAGE_NOTE,
    WORK_PACK_TASK,
    WORK_TASK,
    soft_time_limit,
)
from gym import artifacts
from gym.artifacts import StoreUnavailable

log = logging.getLogger(__name__)

# Database, broker and artifact-store errors that pass: storing and failing retry them
# with back-off (the results of a run may be read from the store, or its kind's store
# function may read it).
TRANSIENT_STORE_ERRORS = (
    DatabaseError,
    InterfaceError,
    BrokerError,
    ConnectionError,
    StoreUnavailable,
)
STORE_MAX_RETRIES = 8


@worker_init.connect
@worker_process_init.connect
def import_work_functions(**_kwargs: Any) -> None:
    """A worker that takes work from the gpu queue imports the kinds' work functions
    (torch, the engine) before its first run: the import takes seconds that would count
    against that run's time limit (and delay its first progress report), and a limit
    that strikes inside it leaves the module half-imported for every later run. The
    worker's main process imports them before it starts its pool (`worker_init`), so a
    pool process, the first or one that replaces a killed one, is forked with them in
    place; `worker_process_init` is the same call in a pool process, a no-op then."""
    # celery-types leaves out the queues that app.amqp holds.
    consumed = current_app.amqp.queues.consume_from  # type: ignore[attr-defined]
    if consumed and GPU_QUEUE not in consumed:
        return
    # The kinds registered themselves when the app was ready (evaluations.apps).
    from evaluations.runs import lifecycle as runs

    warmed: set[str] = set()
    for kind in runs.KINDS.values():
        kind.work_function()
        if kind.pack_work:
            kind.pack_work_function()
        if kind.warm_up and kind.warm_up not in warmed:
            warmed.add(kind.warm_up)
            import_string(kind.warm_up)()


class TransientScoringError(Exception):
    """A failure worth retrying (out of memory on a busy GPU, a lost connection)."""


class RunCancelled(Exception):
    """Raised by the progress callback between two batches when every run of the task
    was cancelled: the work stops, stores nothing, and its message is acknowledged."""


def _hand_over(task: Any, *args: Any) -> None:
    """A message about one run (kind, run id, attempt, ...) on the default queue."""
    task.apply_async(
        args=list(args),
        argsrepr=broker_watch.run_label(args[0], [_hand_over_label(task, args)]),
        queue=DEFAULT_QUEUE,
        retry=True,
        retry_policy=HANDOVER_RETRY_POLICY,
        compression="zlib",
    )


def _hand_over_label(task: Any, args: tuple[Any, ...]) -> tuple[int, ...]:
    """A `store_part` message names its part (kind, run, attempt, part, parts, ...)."""
    if task is store_part:
        return (args[1], args[2], args[3], args[4])
    return (args[1], args[2])


def _report_parts(kind: str, entries: list[dict[str, int]], restart: bool) -> None:
    """Best effort, as _report_progress: each entry a part with its done and size."""
    try:
        progress_parts.apply_async(args=(kind, entries, restart), queue=DEFAULT_QUEUE, retry=False)
    except Exception as exc:  # noqa: BLE001 - whatever the broker says, the runs go on
        log.warning("progress of %s runs not reported: %s", kind, exc)


def _report_progress(
    kind: str, run_id: int, attempt: int, done: int, total: int, restart: bool
) -> None:
    """Best effort: a broker hiccup costs a progress update, never the run."""
    try:
        progress.apply_async(
            args=(kind, run_id, attempt, done, total, restart),
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
        limit = exc.args[0] if isinstance(exc, TimeLimitExceeded) and exc.args else None
        seconds = int(limit) if isinstance(limit, int | float) else None
        reason = failure_reason(exc, limit=seconds, kind=args[0])
        _fail_all(args[0], _work_targets(args), reason)


def _work_targets(args: list[Any] | tuple[Any, ...]) -> list[tuple[int, int]]:
    """(run id, attempt) of each run a work message is about: `work` is about one run,
    `work_pack` about the runs of its entries."""
    if isinstance(args[1], list):
        return [(entry["run"], entry["attempt"]) for entry in args[1]]
    return [(args[1], args[2])]


def _fail_all(kind: str, targets: list[tuple[int, int]], reason: str) -> None:
    for run_id, attempt in targets:
        try:
            _hand_over(fail, kind, run_id, attempt, reason)
        except Exception:  # noqa: BLE001 - the sweep fails the run later, with a reason
            log.exception("could not record the failure of %s run %s", kind, run_id)


def _work_failed(task: Any, exc: Exception, kind: str, targets: list[tuple[int, int]]) -> None:
    """A transient error is retried with back-off (raises Retry); any other, or the last
    try, fails every run of the message with the reason."""
    transient = is_transient(exc)
    if transient and task.request.retries < task.max_retries:
        raise task.retry(exc=exc, countdown=retry_countdown(task.request.retries)) from exc
    if not transient:
        log.exception("%s runs %s failed", kind, [run_id for run_id, _ in targets])
    reason = failure_reason(
        exc, retries=task.request.retries, limit=task.request.soft_time_limit, kind=kind
    )
    for run_id, attempt in targets:
        _hand_over(fail, kind, run_id, attempt, reason)


# The GPU work tasks' options: a run is acknowledged only when its work is handed
# over, and re-delivered when its worker dies. The time limits are defaults only:
# publish.enqueue_work sets the limits of each message.
WORK_TASK_OPTIONS: dict[str, Any] = {
    "base": WorkTask,
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 5,
    "time_limit": settings.CELERY_TASK_HARD_TIME_LIMIT,
    "soft_time_limit": soft_time_limit(settings.CELERY_TASK_HARD_TIME_LIMIT),
}


R = TypeVar("R")  # what a kind's work function returns: one run's results, or a pack's


def _worked(
    task: Any,
    kind: str,
    reporter: _Progress,
    work_function: Callable[[], Callable[..., R]],
    payload: dict[str, Any],
    targets: list[tuple[int, int]],
) -> R | None:
    """The engine's results for the message's runs (`targets`), or None when there is
    nothing to store: all of them were cancelled while it worked, or it failed
    (`_work_failed` then retries the message or fails the runs)."""
    # A delivery starts from 0, also when it is a re-delivery after its worker died.
    reporter.start(payload)
    try:
        # Inside the try: importing torch takes seconds and counts against the time limit.
        return work_function()(payload, progress=reporter)
    except RunCancelled as stop:
        log.info("%s", stop)
    except Exception as exc:
        _work_failed(task, exc, kind, targets)
    return None


@shared_task(name=WORK_TASK, **WORK_TASK_OPTIONS)
def work(self: Any, kind: str, run_id: int, attempt: int, payload: dict[str, Any]) -> None:
    from evaluations.runs import lifecycle as runs

    run_kind = runs.kind_named(kind)
    if _delivered_too_often(self, kind, [(run_id, attempt, 0)]):
        return
    reporter = _Progress(kind, [(run_id, attempt)], watch=not run_kind.stops_itself)
    if reporter.all_cancelled():
        log.info("%s run %s was cancelled before its work started: dropped", kind, run_id)
        return
    results = _worked(self, kind, reporter, run_kind.work_function, payload, [(run_id, attempt)])
    if results is None:
        return
    if (run_id, attempt) in reporter.cancelled_now():
        log.info("%s run %s was cancelled while it was scored: not stored", kind, run_id)
        return
    _hand_over(store, kind, run_id, attempt, results_pack(kind, run_id, attempt, results))


@shared_task(name=WORK_PACK_TASK, **WORK_TASK_OPTIONS)
def work_pack(self: Any, kind: str, entries: list[dict[str, int]], payload: dict[str, Any]) -> None:
    """Parts of several runs (or of one big run) in one engine call; each part's
    results go to `store_part` in their own message, so each run is stored on its own."""
    from evaluations.runs import lifecycle as runs

    run_kind = runs.kind_named(kind)
    if _delivered_too_often(self, kind, [(e["run"], e["attempt"], e["part"]) for e in entries]):
        return
    reporter = _PackProgress(kind, entries, [len(group) for group in payload["groups"]])
    if reporter.all_cancelled():
        log.info("%s runs %s were cancelled before their work started: dropped", kind, entries)
        return
    targets = [(entry["run"], entry["attempt"]) for entry in entries]
    results = _worked(self, kind, reporter, run_kind.pack_work_function, payload, targets)
    if results is None:
        return
    # The engine scored every part together; those of runs cancelled meanwhile are dropped.
    cancelled = reporter.cancelled_now()
    for entry, result in zip(entries, results, strict=True):
        run_id, attempt = entry["run"], entry["attempt"]
        if (run_id, attempt) in cancelled:
            continue
        packed = results_pack(kind, run_id, attempt, result)
        _hand_over(store_part, kind, run_id, attempt, entry["part"], entry["parts"], packed)


def lost_too_often_reason(deliveries: int) -> str:
    return (
        f"This work was started {deliveries} times and its worker died each time before "
        "finishing it (killed by the system, often for lack of memory, or crashed in the "
        "model's code), so it is not started again. Retry it once the worker has more "
        "memory, or with a smaller benchmark."
    )


def _delivered_too_often(task: Any, kind: str, targets: list[tuple[int, int, int]]) -> bool:
    """A message whose worker dies is given to a worker again (acks_late and
    reject_on_worker_lost): a run that kills its worker every time (out of memory) would
    come back for ever. Past GYM_MAX_DELIVERIES its runs fail with the reason. A retry
    after a transient error is a new message, counted on its own."""
    deliveries = broker_watch.count_delivery(kind, targets, try_number=task.request.retries or 0)
    if deliveries <= settings.GYM_MAX_DELIVERIES:
        return False
    log.warning("%s runs %s delivered %s times; failing them", kind, targets, deliveries)
    _fail_all(
        kind,
        sorted({(run, attempt) for run, attempt, _ in targets}),
        lost_too_often_reason(deliveries - 1),
    )
    return True


def retry_countdown(retries: int) -> int:
    """Seconds before the next try of a run's work: 4, 8, 16 ... at most 5 minutes, so a
    busy GPU gets time to free its memory."""
    return min(2 ** (retries + 2), 300)


class _Progress:
    """The worker function's progress callback, called after each batch: throttled to
    one message every GYM_PROGRESS_EVERY_SECONDS (the last one always goes), best effort.
    At most every GYM_CANCEL_CHECK_EVERY_SECONDS it asks the broker whether its runs
    were cancelled, and raises RunCancelled when all of them were (unless the kind
    stops by itself: `watch` False). It also honours the test harness's pacing hook
    (GYM_RUN_HOLD_DIR)."""

    def __init__(self, kind: str, targets: list[tuple[int, int]], *, watch: bool = True) -> None:
        self.kind = kind
        self.targets = sorted(set(targets))
        self.watch = watch
        self.last = 0.0
        self.checked = time.monotonic()

    def start(self, payload: dict[str, Any]) -> None:
        self._send(0, len(payload.get("sentences") or ()), True)
        self.last = time.monotonic()

    def _send(self, done: int, total: int, restart: bool) -> None:
        (run_id, attempt), *_ = self.targets
        _report_progress(self.kind, run_id, attempt, done, total, restart)

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= settings.GYM_PROGRESS_EVERY_SECONDS or done == total:
            self.last = now
            self._send(done, total, False)
        if 0 < done < total:
            self._hold(done, total)
            if time.monotonic() - self.checked >= settings.GYM_CANCEL_CHECK_EVERY_SECONDS:
                if self.all_cancelled():
                    raise RunCancelled(
                        f"{self.kind} runs {self.targets} were cancelled: stopped after "
                        f"{done} of {total} sentences, nothing stored"
                    )

    def cancelled_now(self) -> set[tuple[int, int]]:
        """Which of this task's runs were cancelled (one question to the broker)."""
        if not self.watch:
            return set()
        self.checked = time.monotonic()
        return broker_watch.cancelled_among(self.kind, self.targets)

    def all_cancelled(self) -> bool:
        """Whether every run of this task was cancelled: its work is then for nobody."""
        return self.cancelled_now() >= set(self.targets)

    def _hold(self, done: int, total: int) -> None:
        """While the file `hold` is in GYM_RUN_HOLD_DIR, wait here (after reporting where
        the run is), so that a test decides when a run is mid-flight instead of racing
        it. Unset in production; the soft time limit still interrupts the wait."""
        folder = settings.GYM_RUN_HOLD_DIR
        if not folder or not (Path(folder) / "hold").exists():
            return
        self._send(done, total, False)
        while (Path(folder) / "hold").exists():
            time.sleep(0.05)


class _PackProgress(_Progress):
    """Progress of a packed task, told to each of its parts: the engine counts the
    sentences of all parts together and works through them by length, so each part is
    credited its share of what is done (all of it at the end)."""

    def __init__(self, kind: str, entries: list[dict[str, int]], sizes: list[int]) -> None:
        super().__init__(kind, [(entry["run"], entry["attempt"]) for entry in entries])
        self.entries = entries
        self.sizes = sizes

    def start(self, payload: dict[str, Any]) -> None:
        self._send(0, sum(self.sizes), True)
        self.last = time.monotonic()

    def _send(self, done: int, total: int, restart: bool) -> None:
        shares = [
            {**entry, "done": size if done >= total else size * done // max(total, 1), "size": size}
            for entry, size in zip(self.entries, self.sizes, strict=True)
        ]
        _report_parts(self.kind, shares, restart)


def results_pack(kind: str, run_id: int, attempt: int, results: dict[str, Any]) -> dict[str, Any]:
    """What travels to `store`: a reference to a file when the workers share a results
    folder (the embedded default: a 100,000-item suite gives a result of 100 MB, too big
    to be one message), or a key in the artifact store when there is no such folder and
    the store is an object store (many machines), else the results themselves."""
    folder = settings.GYM_RUN_RESULTS_DIR
    if not folder and settings.GYM_ARTIFACTS_URL:
        # Many machines: through the artifact store every one of them reaches.
        # Through a store that blinks, tried again for a while (GYM_STORE_WRITE_PATIENCE):
        # the results took the GPU's time.
        key = f"results/{kind}-{run_id}-{attempt}-{uuid.uuid4().hex}.json"
        data = json.dumps(results, separators=(",", ":")).encode()
        artifacts.patiently(
            lambda: artifacts.put_file(key, io.BytesIO(data)),
            what=f"the results of {kind} run {run_id}",
        )
        return {"key": key}
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
    if "key" in packed:
        try:
            with artifacts.open_file(_results_key(packed)) as data:
                loaded: dict[str, Any] = json.loads(data.read())
        except FileNotFoundError:
            return None
        return loaded
    path = _results_path(packed)
    if path is None:
        return packed["inline"]
    try:
        with path.open(encoding="utf-8") as data:
            return json.load(data)
    except FileNotFoundError:
        return None


def _results_key(packed: dict[str, Any]) -> str:
    # Only a name under results/, whatever the message says.
    return f"results/{Path(str(packed['key'])).name}"


def results_discard(packed: dict[str, Any]) -> None:
    """Remove the results once stored. Best effort for a key in the store: once the run is
    stored, a store that went away meanwhile costs a stray file, never a retry of the
    stored run."""
    if "key" in packed:
        try:
            artifacts.delete(_results_key(packed))
        except StoreUnavailable as exc:
            log.warning("stored results %s not removed: %s", packed["key"], exc)
        return
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


def failure_reason(
    exc: BaseException, *, retries: int = 0, limit: int | None = None, kind: str = "suite"
) -> str:
    """What the run's page says about a run that failed for good, in the words its kind
    declares (`RunKind.work_name`, `RunKind.shorter`)."""
    from evaluations.runs import lifecycle as runs

    declared = runs.KINDS.get(kind)
    work = declared.work_name if declared else "The work"
    shorter = declared.shorter if declared else "Use a smaller benchmark"
    if isinstance(exc, SoftTimeLimitExceeded | TimeLimitExceeded):
        # The same run on the same worker would take as long again; a kind whose runs
        # are packed into tasks also runs in smaller tasks under a smaller budget.
        packs = declared is not None and declared.packs
        packing = ", to lower GYM_PACK_TOKEN_BUDGET (smaller tasks)" if packs else ""
        return (
            f"{work} took longer than this site's limit of {limit or '?'} s per run and "
            f"was stopped. {shorter}, or ask the site's administrator to raise "
            f"CELERY_TASK_HARD_TIME_LIMIT{packing}, or to add a faster GPU worker."
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
        return f"{work} failed: {exc}"
    if isinstance(exc, StoreUnavailable):
        # A write that waited for the store (artifacts.patiently) says its own tries.
        tried = f" (tried {retries + 1} times)" if retries else ""
        return f"{exc}{tried}. {STORE_OUTAGE_NOTE}"
    if is_transient(exc):
        return f"Gave up after {retries} retries: {exc.__class__.__name__}: {exc}"
    return f"{work} failed: {exc.__class__.__name__}: {exc}"


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: out of memory (a busy GPU, CUDA included), a lost connection, or
    the artifact store out of reach (it may be back by the next try)."""
    return isinstance(
        exc, MemoryError | ConnectionError | TransientScoringError | StoreUnavailable
    ) or (exc.__class__.__name__ == "OutOfMemoryError")


class StoreTask(Task):
    """Storing and failing retry transient errors with back-off (autoretry_for); when
    they give up, the run is failed here with the reason, never left running."""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, WorkerLostError) or not isinstance(args, list | tuple) or len(args) < 3:
            return
        from evaluations.runs import lifecycle as runs

        kind, run_id, attempt = args[0], args[1], args[2]
        if self.name == fail.name and len(args) > 3:
            reason = str(args[3])  # recording the failure failed: record it from here
        elif isinstance(exc, StoreUnavailable):
            reason = f"The results could not be stored. {failure_reason(exc, retries=self.request.retries)}"
        else:
            reason = (
                f"The results could not be stored ({exc.__class__.__name__}: {exc}). Retry the run."
            )
        try:
            runs.run_fail(kind=runs.kind_named(kind), run_id=run_id, attempt=attempt, reason=reason)
        except Exception:  # noqa: BLE001 - the database is gone; the sweep fails it later
            log.exception("could not record the failure of %s run %s", kind, run_id)
        if isinstance(exc, StoreUnavailable):
            # The results are kept (a file in the results folder, or a key in the store):
            # the store may be back by the time anyone reads them. `results_prune`
            # removes them after a week if nobody does.
            return
        if self.name in (store.name, store_part.name) and isinstance(args[-1], dict):
            results_discard(args[-1])


RESULTS_LOST = "The worker's results were lost before they could be stored. Retry the run."

# A write on the default queue: kept until done, and retried through transient errors.
STORE_RETRY_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT_STORE_ERRORS,
    "max_retries": STORE_MAX_RETRIES,
    # 1, 2, 4 ... s, at most a minute, jittered so that a burst does not retry in step.
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "retry_jitter": True,
}
_STORE_OPTIONS: dict[str, Any] = {"bind": True, "base": StoreTask, **STORE_RETRY_OPTIONS}


@shared_task(name="runs.store", **_STORE_OPTIONS)
def store(self: Any, kind: str, run_id: int, attempt: int, packed: dict[str, Any]) -> bool:
    from evaluations.runs import lifecycle as runs

    run_kind = runs.kind_named(kind)
    results = results_unpack(packed)
    if results is None:
        # Stored and cleaned up by an earlier delivery, or lost with a disk: the run is
        # then finished, or it fails here with the reason.
        runs.run_fail(
            kind=run_kind,
            run_id=run_id,
            attempt=attempt,
            reason=RESULTS_LOST,
        )
        return False
    wrote = run_kind.store_function()(run_id=run_id, attempt=attempt, results=results)
    results_discard(packed)
    return wrote


@shared_task(name="runs.store_part", **_STORE_OPTIONS)
def store_part(
    self: Any, kind: str, run_id: int, attempt: int, part: int, parts: int, packed: dict[str, Any]
) -> bool:
    """One part's results of a packed task (see `runs.run_part_store`)."""
    from evaluations.runs import lifecycle as runs

    run_kind = runs.kind_named(kind)
    results = results_unpack(packed)
    if results is None:
        if runs.run_part_stored(
            kind=run_kind, run_id=run_id, attempt=attempt, part=part, parts=parts
        ):
            # An earlier delivery kept it and removed the file; if that delivery died
            # while storing the whole run, this one stores it.
            return runs.run_parts_store_kept(
                kind=run_kind, run_id=run_id, attempt=attempt, parts=parts
            )
        runs.run_fail(kind=run_kind, run_id=run_id, attempt=attempt, reason=RESULTS_LOST)
        return False
    wrote = runs.run_part_store(
        kind=run_kind, run_id=run_id, attempt=attempt, part=part, parts=parts, results=results
    )
    results_discard(packed)
    return wrote


@shared_task(name="runs.fail", **_STORE_OPTIONS)
def fail(self: Any, kind: str, run_id: int, attempt: int, reason: str) -> bool:
    from evaluations.runs import lifecycle as runs

    return runs.run_fail(kind=runs.kind_named(kind), run_id=run_id, attempt=attempt, reason=reason)


@shared_task(name="runs.progress", ignore_result=True)
def progress(
    kind: str, run_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    from evaluations.runs import lifecycle as runs

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


@shared_task(name="runs.progress_parts", ignore_result=True)
def progress_parts(kind: str, entries: list[dict[str, int]], restart: bool = False) -> None:
    """Progress of the parts of a packed task, each recorded on its own run."""
    from evaluations.runs import lifecycle as runs

    run_kind = runs.kind_named(kind)
    for entry in entries:
        try:
            runs.run_part_progress(
                kind=run_kind,
                run_id=entry["run"],
                attempt=entry["attempt"],
                part=entry["part"],
                parts=entry["parts"],
                done=entry["done"],
                size=entry["size"],
                restart=restart,
            )
        except (DatabaseError, InterfaceError) as exc:
            log.warning("progress of %s run %s not recorded: %s", kind, entry["run"], exc)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> None:
    from evaluations.runs import lifecycle as runs

    try:
        holds = broker_watch.broker_holds()
    except Exception as exc:  # noqa: BLE001 - the rest of the sweep needs no broker
        log.warning("sweep: could not look at the broker and workers: %s", exc)
        holds = None
    if holds is not None:
        holds.record_status()
    runs.runs_sweep(holds=holds)
    # Uploaded models' checks that never reached the queue, or were lost with it.
    from evaluations.language_models.checks import model_checks_sweep

    model_checks_sweep()
    # A week: far beyond any store's retries, short enough that lost files do not pile up.
    results_prune(older_than_seconds=7 * 24 * 3600)
