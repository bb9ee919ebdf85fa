"""Celery tasks of an uploaded model's check: `check` on the gpu queue loads the model
and scores one sentence (no database: the model's id, source and kind come in the
message), and hands its verdict to `check_record` on the default queue, which writes it
(`checks.model_check_record`). Like a run's work, a check is acknowledged only when its
verdict is handed over, goes to another worker when its worker dies, and is refused
after GYM_MAX_DELIVERIES deliveries that each killed their worker."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from django.conf import settings

from evaluations.language_models.checks import (
    CHECK_LABEL,
    CHECK_TASK,
    model_check_again,
    model_check_record,
)
from evaluations.runs import broker_watch
from evaluations.runs.publish import DEFAULT_QUEUE, HANDOVER_RETRY_POLICY
from evaluations.runs.tasks import (
    STORE_RETRY_OPTIONS,
    is_transient,
    lost_too_often_reason,
    retry_countdown,
)
from gym.artifacts import StoreUnavailable

log = logging.getLogger(__name__)


def _hand_over(model_id: int, reason: str, info: dict[str, Any]) -> None:
    _send(
        check_record,
        [model_id, reason, info],
        queue=DEFAULT_QUEUE,
        retry_policy=HANDOVER_RETRY_POLICY,
    )


def _send(task: Any, args: list[Any], **options: Any) -> None:
    """A message about one model's check, labelled with it for the logs."""
    task.apply_async(args=args, argsrepr=f"{CHECK_LABEL} {args[0]}", retry=True, **options)


def check_reason(exc: BaseException) -> str:
    """What the model's page says of a check that failed."""
    if isinstance(exc, SoftTimeLimitExceeded | TimeLimitExceeded):
        return (
            "Loading the model and scoring one sentence took longer than this site's limit "
            "per task (CELERY_TASK_HARD_TIME_LIMIT)."
        )
    from evaluations.scoring.schema import ModelLoadError

    if isinstance(exc, ModelLoadError):
        return f"The model cannot run: {exc}"
    return f"The model cannot run: {exc.__class__.__name__}: {exc}"


class CheckTask(Task):
    """Refuses the model when its check ends without a verdict (the hard time limit)."""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        from billiard.exceptions import WorkerLostError

        if isinstance(exc, WorkerLostError) or not isinstance(args, list | tuple) or not args:
            return  # the broker gives the check to another worker
        try:
            _hand_over(args[0], check_reason(exc), {})
        except Exception:  # noqa: BLE001 - the sweep sends the check again
            log.exception("could not record the failed check of model %s", args[0])


@shared_task(
    name=CHECK_TASK,
    base=CheckTask,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
)
def check(self: Any, model_id: int, source: str, kind: str) -> None:
    deliveries = broker_watch.count_delivery(
        CHECK_LABEL, [(model_id, 0, 0)], try_number=self.request.retries or 0
    )
    if deliveries > settings.GYM_MAX_DELIVERIES:
        _hand_over(model_id, f"The check failed: {lost_too_often_reason(deliveries - 1)}", {})
        return
    from evaluations.scoring.check import check_model

    try:
        info = check_model(source, kind=kind)
    except Exception as exc:
        if is_transient(exc) and self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
        if isinstance(exc, StoreUnavailable):
            # Not the model's fault: no verdict; the sweep sends the check again.
            log.warning("check of model %s met an unreachable store: %s", model_id, exc)
            _send(
                check_again,
                [model_id, str(exc)],
                queue=DEFAULT_QUEUE,
                retry_policy=HANDOVER_RETRY_POLICY,
            )
            return
        log.info("model %s refused by its check: %s", model_id, exc)
        _hand_over(model_id, check_reason(exc), {})
        return
    _hand_over(model_id, "", info)


@shared_task(name="models.check_record", **STORE_RETRY_OPTIONS)
def check_record(model_id: int, reason: str, info: dict[str, Any]) -> bool:
    return model_check_record(model_id=model_id, reason=reason, info=info)


@shared_task(name="models.check_again", **STORE_RETRY_OPTIONS)
def check_again(model_id: int, reason: str) -> bool:
    return model_check_again(model_id=model_id, reason=reason)
