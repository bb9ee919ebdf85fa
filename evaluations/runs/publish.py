"""Publishing work on the gpu queue, by task name: the services (`evaluations.runs.lifecycle`,
`evaluations.language_models.checks`) send tasks without importing the modules that
define them (`evaluations.runs.tasks`, `evaluations.language_models.tasks`), which import
the services in turn. The queues, retry policies and time limits that both sides share
are here too."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.conf import settings

from evaluations.runs import broker_watch

# The end of the reason of a run that failed because the artifact store could not be
# reached (`tasks.failure_reason`): `lifecycle.run_fail` marks such a run
# `waiting_for_store`, and the sweep sends it again once the store answers (at most
# GYM_STORE_OUTAGE_RESENDS times).
STORE_OUTAGE_NOTE = (
    "Nothing was lost: the site sends the run again once the store is back (or retry it then)."
)

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
# The names of the run core's work tasks (`evaluations.runs.tasks.work`, `work_pack`).
WORK_TASK = "runs.work"
WORK_PACK_TASK = "runs.work_pack"


def soft_time_limit(hard: int) -> int:
    """A little before the hard limit, so that a run that is too long can say so itself
    instead of being killed without a word."""
    return max(hard - min(60, max(hard // 10, 1)), 1)


def send_gpu_task(name: str, args: list[Any], argsrepr: str) -> None:
    """Publish the task `name` on the gpu queue, its time limits in the message, from
    this site's settings at the time of the request, so every worker applies the same
    ones. The signature finds the task in this process's registry where its module is
    imported (so that an eager test run runs it here), and sends it by name otherwise."""
    hard = settings.CELERY_TASK_HARD_TIME_LIMIT
    # celery-types' Signature.apply_async leaves out the options Task.apply_async takes.
    signature: Any = current_app.signature(name)
    signature.apply_async(
        args=args,
        argsrepr=argsrepr,
        queue=GPU_QUEUE,
        time_limit=hard,
        soft_time_limit=soft_time_limit(hard),
        retry=True,
        retry_policy=PUBLISH_RETRY_POLICY,
        compression="zlib",
    )


def work_labels(args: list[Any]) -> list[tuple[int, ...]]:
    """What a work message's label names: its runs, and for a packed task each part."""
    if isinstance(args[1], list):
        return [(e["run"], e["attempt"], e["part"], e["parts"]) for e in args[1]]
    return [(args[1], args[2])]


def _publish_work(name: str, args: list[Any]) -> None:
    # The runs it is about, for the sweep (evaluations.runs.broker_watch) and the logs.
    send_gpu_task(name, args, broker_watch.run_label(args[0], work_labels(args)))


def enqueue_work(kind: str, run_id: int, attempt: int, payload: dict[str, Any]) -> None:
    """Publish a run's work (`runs.work`)."""
    _publish_work(WORK_TASK, [kind, run_id, attempt, payload])


def enqueue_pack(kind: str, entries: list[dict[str, int]], payload: dict[str, Any]) -> None:
    """Publish a packed task (`runs.work_pack`): parts of one or more runs, each entry
    {"run", "attempt", "part", "parts"} with its sentences in payload["groups"] (see
    evaluations.runs.packing)."""
    _publish_work(WORK_PACK_TASK, [kind, entries, payload])
