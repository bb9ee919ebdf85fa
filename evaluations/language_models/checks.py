"""The check of an uploaded model, on the database's side: sending it to a GPU worker
(`tasks.check`, which reads no database), recording what the worker found, and the sweep
that sends again a check that never reached the task queue or was lost with it.

A model's status goes `checking` -> `ready` or `refused` (with the reason), once: a
verdict that comes again (a re-delivered check) changes nothing. A check that could not
reach the artifact store gives no verdict: the model stays `checking`, its reason says
the store could not be reached, and the sweep sends the check again."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluations.model_sources import public_error
from evaluations.models import LanguageModel
from evaluations.runs import publish

log = logging.getLogger(__name__)

Status = LanguageModel.Status

# The check's task (`evaluations.language_models.tasks.check`), sent by name.
CHECK_TASK = "models.check"
# How the broker's delivery counter and the logs name a check.
CHECK_LABEL = "model-check"


def enqueue_check(model_id: int, source: str, kind: str) -> None:
    publish.send_gpu_task(CHECK_TASK, [model_id, source, kind], f"{CHECK_LABEL} {model_id}")


def check_send(model_id: int) -> bool:
    """Hand the model's check to the gpu queue and note when; False (logged) when the task
    queue cannot be reached: the sweep sends it later."""
    model = LanguageModel.objects.filter(pk=model_id, status=Status.CHECKING).first()
    if model is None:
        return False
    try:
        enqueue_check(model.pk, model.source, model.kind)
    except Exception as exc:  # noqa: BLE001 - any broker failure leaves it to the sweep
        log.warning("could not send the check of model %s: %s", model_id, exc)
        return False
    LanguageModel.objects.filter(pk=model_id).update(check_sent_at=timezone.now())
    return True


def model_check_record(*, model_id: int, reason: str, info: dict[str, Any]) -> bool:
    """A worker's verdict: `ready` when `reason` is empty, else `refused` with it (paths
    on the server replaced). Also learns what the worker found of the model (its size).
    False when the model was not being checked (a verdict given before)."""
    changes: dict[str, Any] = {
        "status": Status.REFUSED if reason else Status.READY,
        "reason": public_error(reason),
    }
    if isinstance(info.get("n_params"), int):
        changes["parameter_count"] = info["n_params"]
    return bool(LanguageModel.objects.filter(pk=model_id, status=Status.CHECKING).update(**changes))


STORE_DOWN_NOTE = "The check is sent again when the store is back."


def model_check_again(*, model_id: int, reason: str) -> bool:
    """A check that could not reach the artifact store: no verdict. The model stays
    `checking` with the reason (the store could not be reached), and is marked unsent, so
    the next sweep sends its check again. False when the model was not being checked."""
    return bool(
        LanguageModel.objects.filter(pk=model_id, status=Status.CHECKING).update(
            reason=public_error(f"{reason} {STORE_DOWN_NOTE}"), check_sent_at=None
        )
    )


def refused_for_an_outage(model: LanguageModel) -> bool:
    """Refused by a check that met an unreachable store (before such a check left the
    model checking): a verdict about the store, not about the model."""
    return model.status == Status.REFUSED and "could not be reached" in model.reason


def model_check_sent_again(model_id: int) -> None:
    """Back to `checking`, unsent: the sweep sends its check."""
    LanguageModel.objects.filter(pk=model_id).update(
        status=Status.CHECKING, reason="", check_sent_at=None
    )


def lost_after() -> timedelta:
    """How long after it was sent a check that is not done must have been lost: by then
    the broker has given a dead worker's message to another (the visibility timeout), and
    any delivery has met the hard time limit."""
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600)
    return timedelta(seconds=int(visibility) + settings.CELERY_TASK_HARD_TIME_LIMIT)


def model_checks_sweep() -> int:
    """Send the checks that never reached the task queue, or that it lost; returns how
    many were sent. A check that kills its worker each time is refused by the task itself
    after GYM_MAX_DELIVERIES deliveries."""
    stale = timezone.now() - lost_after()
    waiting = LanguageModel.objects.filter(status=Status.CHECKING).filter(
        check_sent_at__isnull=True
    ) | LanguageModel.objects.filter(status=Status.CHECKING, check_sent_at__lt=stale)
    sent = 0
    for model_id in waiting.values_list("pk", flat=True):
        sent += check_send(model_id)
    return sent
