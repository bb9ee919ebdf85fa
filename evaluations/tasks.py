"""Celery tasks: thin wrappers around the services and the scoring worker.

`score` runs on the `gpu` queue and needs only the broker and the model; it reports
progress and hands its results to `store`, which runs on the default queue next to the
database."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from django.conf import settings

log = logging.getLogger(__name__)

GPU_QUEUE = "gpu"
DEFAULT_QUEUE = "celery"
# Publishing must fail fast when the broker is down, so that a request can say so.
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 1,
}


def soft_time_limit(hard: int) -> int:
    """A little before the hard limit, so that a run that is too long can say so itself
    instead of being killed without a word."""
    return max(hard - min(60, max(hard // 10, 1)), 1)


class TransientScoringError(Exception):
    """A failure worth retrying (out of memory on a busy GPU, a lost connection)."""


def enqueue_score(payload: dict[str, Any]) -> None:
    """Publish a scoring run. Its time limits travel in the message, from this site's
    settings at the time of the request, so every worker applies the same ones."""
    hard = settings.CELERY_TASK_HARD_TIME_LIMIT
    score.apply_async(
        args=[payload],
        queue=GPU_QUEUE,
        time_limit=hard,
        soft_time_limit=soft_time_limit(hard),
        retry=True,
        retry_policy=PUBLISH_RETRY_POLICY,
    )


def _send(task: Any, *args: Any) -> None:
    task.apply_async(
        args=list(args), queue=DEFAULT_QUEUE, retry=True, retry_policy=PUBLISH_RETRY_POLICY
    )


class ScoreTask(Task):
    """Reports a run that the hard time limit killed. The soft limit comes first and
    usually ends the run with its reason; the hard one kills the pool process only when
    the run did not stop (stuck in native code), and then the worker's main process
    calls on_failure. (A worker that dies is not a failure: its message goes to another
    worker.)"""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, TimeLimitExceeded) and args and isinstance(args[0], dict):
            payload = args[0]
            limit = exc.args[0] if exc.args else None
            _send(
                fail,
                payload["evaluation_id"],
                payload["attempt"],
                failure_reason(exc, limit=int(limit) if isinstance(limit, int | float) else None),
            )


@shared_task(
    name="evaluations.score",
    base=ScoreTask,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    # Defaults only: enqueue_score sets the limits of each message.
    time_limit=settings.CELERY_TASK_HARD_TIME_LIMIT,
    soft_time_limit=soft_time_limit(settings.CELERY_TASK_HARD_TIME_LIMIT),
)
def score(self: Any, payload: dict[str, Any]) -> None:
    evaluation_id, attempt = payload["evaluation_id"], payload["attempt"]
    total = len(payload["sentences"])
    # A run starts from 0, also when it is a re-delivery after its worker died.
    _send(progress, evaluation_id, attempt, 0, total, True)
    try:
        # Inside the try: importing torch takes seconds and counts against the time limit.
        from evaluations import worker

        results = worker.run_scoring(
            payload, progress=lambda done, tot: _send(progress, evaluation_id, attempt, done, tot)
        )
    except Exception as exc:
        transient = _is_transient(exc)
        if transient and self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 2), 300)) from exc
        if not transient:
            log.exception("scoring evaluation %s failed", evaluation_id)
        _send(
            fail,
            evaluation_id,
            attempt,
            failure_reason(exc, retries=self.request.retries, limit=self.request.soft_time_limit),
        )
        return
    _send(store, evaluation_id, attempt, results)


def failure_reason(exc: BaseException, *, retries: int = 0, limit: int | None = None) -> str:
    """What the evaluation page says about a run that failed for good."""
    if isinstance(exc, SoftTimeLimitExceeded | TimeLimitExceeded):
        # The same run on the same worker would take as long again.
        return (
            f"Scoring took longer than this site's limit of {limit or '?'} s per run and "
            "was stopped. Split the suite into smaller ones, or ask the site's administrator "
            "to raise CELERY_TASK_HARD_TIME_LIMIT (or to add a faster GPU worker)."
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


@shared_task(name="evaluations.store", acks_late=True, reject_on_worker_lost=True)
def store(evaluation_id: int, attempt: int, results: dict[str, Any]) -> bool:
    from evaluations import services

    return services.results_store(evaluation_id=evaluation_id, attempt=attempt, results=results)


@shared_task(name="evaluations.progress", ignore_result=True)
def progress(
    evaluation_id: int, attempt: int, done: int, total: int, restart: bool = False
) -> None:
    from evaluations import services

    services.progress_record(
        evaluation_id=evaluation_id, attempt=attempt, done=done, total=total, restart=restart
    )


@shared_task(name="evaluations.fail", acks_late=True)
def fail(evaluation_id: int, attempt: int, reason: str) -> None:
    from evaluations import services

    services.evaluation_fail(evaluation_id=evaluation_id, attempt=attempt, reason=reason)
