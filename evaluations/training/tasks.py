"""Celery tasks of training runs, besides the shared run chain (`evaluations.runs.tasks`): a
training worker, which reads no database, reports each checkpoint and its loss curve
through these, on the default queue."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from evaluations.runs.tasks import STORE_MAX_RETRIES, TRANSIENT_STORE_ERRORS

log = logging.getLogger(__name__)


@shared_task(
    name="training.checkpoint",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT_STORE_ERRORS,
    max_retries=STORE_MAX_RETRIES,
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=True,
)
def checkpoint(
    kind: str, run_id: int, attempt: int, point: dict[str, Any], entries: list[dict[str, Any]]
) -> bool:
    from evaluations.training import services

    return services.training_checkpoint_store(
        run_id=run_id, attempt=attempt, point=point, entries=entries
    )


@shared_task(name="training.log", ignore_result=True)
def loss_report(kind: str, run_id: int, attempt: int, entries: list[dict[str, Any]]) -> None:
    from django.db import InterfaceError
    from django.db import OperationalError as DatabaseError

    from evaluations.training import services

    try:
        services.training_log_append(run_id=run_id, attempt=attempt, entries=entries)
    except (DatabaseError, InterfaceError) as exc:  # best effort, as progress
        log.warning("loss report of training run %s not recorded: %s", run_id, exc)
