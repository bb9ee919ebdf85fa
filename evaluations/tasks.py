"""Celery tasks: thin wrappers around the services and the scoring worker.

`score` runs on the `gpu` queue and needs only the broker and the model; it reports
progress and hands its results to `store`, which runs on the default queue next to the
database."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
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


class TransientScoringError(Exception):
    """A failure worth retrying (out of memory on a busy GPU, a lost connection)."""


def enqueue_score(payload: dict[str, Any]) -> None:
    score.apply_async(
        args=[payload], queue=GPU_QUEUE, retry=True, retry_policy=PUBLISH_RETRY_POLICY
    )


def _send(task: Any, *args: Any) -> None:
    task.apply_async(
        args=list(args), queue=DEFAULT_QUEUE, retry=True, retry_policy=PUBLISH_RETRY_POLICY
    )


@shared_task(
    name="evaluations.score",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    time_limit=settings.CELERY_TASK_HARD_TIME_LIMIT,
    soft_time_limit=max(settings.CELERY_TASK_HARD_TIME_LIMIT - 60, 30),
)
def score(self: Any, payload: dict[str, Any]) -> None:
    from evaluations import scoring, worker

    evaluation_id, attempt = payload["evaluation_id"], payload["attempt"]
    total = len(payload["sentences"])
    _send(progress, evaluation_id, attempt, 0, total)
    try:
        results = worker.run_scoring(
            payload, progress=lambda done, tot: _send(progress, evaluation_id, attempt, done, tot)
        )
    except scoring.ModelLoadError as exc:
        # Permanent: the model is not there; retrying will not make it appear.
        _send(fail, evaluation_id, attempt, f"The model could not be loaded: {exc}")
        return
    except scoring.ScoringError as exc:
        _send(fail, evaluation_id, attempt, f"Scoring failed: {exc}")
        return
    except (MemoryError, ConnectionError, TransientScoringError) as exc:
        if self.request.retries >= self.max_retries:
            _send(
                fail, evaluation_id, attempt, f"Gave up after {self.request.retries} retries: {exc}"
            )
            return
        raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 2), 300)) from exc
    except Exception as exc:
        if _is_cuda_oom(exc) and self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 2), 300)) from exc
        log.exception("scoring evaluation %s failed", evaluation_id)
        _send(fail, evaluation_id, attempt, f"Scoring failed: {exc.__class__.__name__}: {exc}")
        return
    _send(store, evaluation_id, attempt, results)


def _is_cuda_oom(exc: BaseException) -> bool:
    return exc.__class__.__name__ == "OutOfMemoryError"


@shared_task(name="evaluations.store", acks_late=True, reject_on_worker_lost=True)
def store(evaluation_id: int, attempt: int, results: dict[str, Any]) -> bool:
    from evaluations import services

    return services.results_store(evaluation_id=evaluation_id, attempt=attempt, results=results)


@shared_task(name="evaluations.progress", ignore_result=True)
def progress(evaluation_id: int, attempt: int, done: int, total: int) -> None:
    from evaluations import services

    services.progress_record(evaluation_id=evaluation_id, attempt=attempt, done=done, total=total)


@shared_task(name="evaluations.fail", acks_late=True)
def fail(evaluation_id: int, attempt: int, reason: str) -> None:
    from evaluations import services

    services.evaluation_fail(evaluation_id=evaluation_id, attempt=attempt, reason=reason)
