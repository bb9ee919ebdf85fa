"""What the broker and the live workers hold, so that no run waits for a worker that is
gone (the Celery side of the sweep and of the supervisor's liveness check).

Every message of a run's chain (`work`, `work_pack`, `store`, `store_part`, `fail`) is
labelled with the runs it is about (its `argsrepr`, which Celery keeps in the message's
headers and which workers report for the tasks they hold): `gym-runs suite 12/1 13/1`.
A run that is queued or running is *held* when a label naming it is in one of the
queues, or is active, reserved or scheduled (a retry's countdown) in a worker that
answers. A run split into parts names its part too (`12/1:0/2`): a part that started
(it has a `RunPart` row), is not stored and is held by nobody is lost though the run's
other parts are held. A run (or a part) that nobody holds for GYM_SWEEP_ORPHAN_AFTER
seconds lost its message with a worker that died holding it (Redis gives such a message back only after the
visibility timeout, hours later): the sweep sends it again. The work is idempotent, so a
second copy of a message costs time, never a second result.

One control command (`gym_holds`) answers everything the sweep and the supervisor ask
of a worker in one round trip. Only a Redis broker is inspected; with any other the
sweep does what it did before (send what never reached the broker, fail what ran too
long)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from celery.worker.control import inspect_command
from django.conf import settings

log = logging.getLogger(__name__)

LABEL = "gym-runs"
# The queues whose messages hold runs: the GPU work and the storing (default) queue.
WATCHED_QUEUES = ("gpu", "celery")
STATUS_KEY = "gym:workers"
SUSPECTS_KEY = "gym:sweep:suspects"
DELIVERIES_KEY = "gym:deliveries:{kind}:{run}:{attempt}:{part}:{try_number}"
# Set when a run's attempt is cancelled; its scoring worker reads it between batches.
CANCELLED_KEY = "gym:cancelled:{kind}:{run}:{attempt}"
# Longer than any run may take (the hard time limit), short enough not to pile up.
CANCELLED_KEEP_SECONDS = 7 * 24 * 3600

Target = tuple[str, int, int]  # (kind, run id, attempt)
PartTarget = tuple[str, int, int, int]  # (kind, run id, attempt, part index)


def run_label(kind: str, targets: Iterable[tuple[int, ...]]) -> str:
    """Targets are (run, attempt), or (run, attempt, part, parts) for a part of a split
    run."""
    words = []
    for run, attempt, *split in targets:
        part = f":{split[0]}/{split[1]}" if len(split) == 2 and split[1] > 1 else ""
        words.append(f"{run}/{attempt}{part}")
    return " ".join([LABEL, kind, *words])


def parse_label(text: object) -> list[tuple[str, int, int, int | None]]:
    """What a label names: (kind, run, attempt, part index or None for a whole run);
    [] for anything that is not a label."""
    if not isinstance(text, str) or not text.startswith(LABEL + " "):
        return []
    words = text.split()
    if len(words) < 3:
        return []
    kind, found = words[1], []
    for word in words[2:]:
        whole, _, split = word.partition(":")
        run, _, attempt = whole.partition("/")
        part = split.partition("/")[0]
        if run.isdigit() and attempt.isdigit():
            found.append((kind, int(run), int(attempt), int(part) if part.isdigit() else None))
    return found


@inspect_command()
def gym_holds(state: Any, **_kwargs: Any) -> dict[str, Any]:
    """What this worker holds: the labels of its active, reserved and scheduled tasks,
    how many are active and reserved, and the queues it consumes."""
    import celery.worker.state as worker_state

    active = list(worker_state.active_requests)
    reserved = [r for r in worker_state.reserved_requests if r not in worker_state.active_requests]
    scheduled = []
    for waiting in state.consumer.timer.schedule.queue:
        args = getattr(waiting.entry, "args", None) or ()
        if args and hasattr(args[0], "argsrepr"):
            scheduled.append(args[0])
    consumer = state.consumer.task_consumer
    return {
        "queues": [queue.name for queue in consumer.queues] if consumer else [],
        "active": len(active),
        "reserved": len(reserved),
        "labels": [r.argsrepr for r in [*active, *reserved, *scheduled]],
    }


def _redis_client(connection: Any) -> Any | None:
    """The broker connection's Redis client, or None for another kind of broker."""
    if getattr(connection.transport, "driver_type", "") != "redis":
        return None
    return connection.default_channel.client


def _queue_keys(connection: Any, queue: str) -> list[str]:
    """A queue's lists in Redis: kombu keeps one per priority step."""
    channel = connection.default_channel
    return [channel._q_for_pri(queue, priority) for priority in channel.priority_steps]


def _label_of(raw: bytes) -> str:
    """A queued message's label, read from its JSON without decoding its (compressed,
    base64) body: the body holds no quote, so the first "argsrepr" key is the header's."""
    at = raw.find(b'"argsrepr":')
    if at < 0:
        return ""
    start = raw.find(b'"', at + len(b'"argsrepr":'))
    try:
        value, _ = json.JSONDecoder().raw_decode(raw[start:].decode("utf-8", "replace"))
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""


def _waiting(client: Any, connection: Any, queue: str) -> tuple[int, list[str]]:
    count, labels = 0, []
    for key in _queue_keys(connection, queue):
        for raw in client.lrange(key, 0, -1):
            count += 1
            labels.append(_label_of(raw))
    return count, labels


def _target(key: str) -> Target | None:
    """The run of a suspects entry ("kind run/attempt")."""
    kind, _, rest = key.partition(" ")
    run, _, attempt = rest.partition("/")
    try:
        return (kind, int(run), int(attempt))
    except ValueError:
        return None


@dataclass
class Holds:
    """A look at the broker and the workers at one moment."""

    held: set[Target] = field(default_factory=set)
    held_parts: set[PartTarget] = field(default_factory=set)
    workers: dict[str, list[str]] = field(default_factory=dict)  # hostname -> queues
    waiting: dict[str, int] = field(default_factory=dict)  # queue -> messages
    client: Any = None

    def hold(self, label: object) -> None:
        for kind, run, attempt, part in parse_label(label):
            self.held.add((kind, run, attempt))
            if part is not None:
                self.held_parts.add((kind, run, attempt, part))

    def consumers(self, queue: str) -> int:
        return sum(1 for queues in self.workers.values() if queue in queues)

    def confirm_orphans(
        self, orphans: set[Target], *, after: float, now: float | None = None
    ) -> set[Target]:
        """Of the runs nobody holds now, those that nobody held at every look for
        `after` seconds (remembered in the broker): a message between a queue and a
        worker at the moment of one look is not taken for lost."""
        now = time.time() if now is None else now
        try:
            before = json.loads(self.client.get(SUSPECTS_KEY) or b"{}")
        except ValueError:
            before = {}
        seen = {f"{k} {r}/{a}": before.get(f"{k} {r}/{a}", now) for k, r, a in orphans}
        self.client.set(SUSPECTS_KEY, json.dumps(seen), ex=24 * 3600)
        return {(k, r, a) for k, r, a in orphans if now - seen[f"{k} {r}/{a}"] >= after}

    def forget(self, targets: set[Target]) -> None:
        """Start the count again for runs just sent again: their new message must go
        unheld for the whole `after` too before it is taken for lost (else a worker
        that misses one look at a busy moment has the run sent a third time, and each
        delivery counts towards GYM_MAX_DELIVERIES)."""
        try:
            before = json.loads(self.client.get(SUSPECTS_KEY) or b"{}")
        except ValueError:
            return
        left = {key: at for key, at in before.items() if _target(key) not in targets}
        self.client.set(SUSPECTS_KEY, json.dumps(left), ex=24 * 3600)

    def record_status(self) -> None:
        """What the site's pages say about workers (see `worker_status`)."""
        status = {
            "checked_at": time.time(),
            "queues": {
                queue: {"workers": self.consumers(queue), "waiting": self.waiting.get(queue, 0)}
                for queue in WATCHED_QUEUES
            },
        }
        self.client.set(STATUS_KEY, json.dumps(status), ex=7 * 24 * 3600)


def broker_holds(timeout: float = 2.0) -> Holds | None:
    """The queues first, then the workers: a message that moves from a queue to a
    worker between the two looks is seen in the second."""
    app = current_app
    with app.connection_for_read() as connection:
        client = _redis_client(connection)
        if client is None:
            return None
        holds = Holds(client=client)
        for queue in WATCHED_QUEUES:
            count, labels = _waiting(client, connection, queue)
            holds.waiting[queue] = count
            for label in labels:
                holds.hold(label)
        replies = app.control.broadcast(
            "gym_holds", reply=True, timeout=timeout, connection=connection
        )
        for reply in replies or ():
            for hostname, answer in reply.items():
                if not isinstance(answer, dict):
                    continue
                holds.workers[hostname] = list(answer.get("queues") or ())
                for label in answer.get("labels") or ():
                    holds.hold(label)
        return holds


def worker_state(hostname: str, queue: str, timeout: float = 3.0) -> dict[str, Any] | None:
    """For the supervisor: whether the worker answered, what it has active and reserved,
    and how many messages wait in its queue. None when the broker is not Redis."""
    app = current_app
    with app.connection_for_read() as connection:
        client = _redis_client(connection)
        if client is None:
            return None
        waiting = sum(client.llen(key) for key in _queue_keys(connection, queue))
        replies = app.control.broadcast(
            "gym_holds",
            reply=True,
            timeout=timeout,
            destination=[hostname],
            connection=connection,
        )
    answer = next((r[hostname] for r in replies or () if hostname in r), None)
    if not isinstance(answer, dict):
        return {"answered": False, "waiting": waiting}
    return {
        "answered": True,
        "waiting": waiting,
        "active": answer.get("active", 0),
        "reserved": answer.get("reserved", 0),
    }


def count_delivery(kind: str, targets: Iterable[tuple[int, int, int]], *, try_number: int) -> int:
    """Count this delivery of a work message (targets: run, attempt, part) and return
    the most deliveries any of them has had. 0 when the broker cannot count."""
    try:
        # app.pool is kombu's connection pool; celery-types leaves out its acquire().
        with current_app.pool.acquire(block=True, timeout=5) as connection:  # type: ignore[attr-defined]
            client = _redis_client(connection)
            if client is None:
                return 0
            most = 0
            for run, attempt, part in targets:
                key = DELIVERIES_KEY.format(
                    kind=kind, run=run, attempt=attempt, part=part, try_number=try_number
                )
                most = max(most, int(client.incr(key)))
                client.expire(key, 7 * 24 * 3600)
            return most
    except Exception as exc:  # noqa: BLE001 - counting is a guard, never a reason to stop
        log.warning("deliveries of %s runs not counted: %s", kind, exc)
        return 0


def cancel_mark(kind: str, run: int, attempt: int) -> bool:
    """Tell the workers, which read no database, that this attempt of a run is cancelled
    (see `cancelled_among`). Best effort: False when the broker cannot be told; the run
    is cancelled all the same, and its results are refused when they come."""
    try:
        # celery-types gives the app's connection pool a producer pool's type.
        with current_app.pool.acquire(block=True, timeout=5) as connection:  # type: ignore[attr-defined]
            client = _redis_client(connection)
            if client is None:
                return False
            key = CANCELLED_KEY.format(kind=kind, run=run, attempt=attempt)
            client.set(key, "1", ex=CANCELLED_KEEP_SECONDS)
            return True
    except Exception as exc:  # noqa: BLE001 - cancelling never fails for the broker
        log.warning("workers not told that %s run %s was cancelled: %s", kind, run, exc)
        return False


def cancelled_among(kind: str, targets: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which of these (run, attempt) were cancelled: one round trip to the broker; none
    when it cannot say (the work then goes on, and its results are refused)."""
    wanted = sorted(set(targets))
    if not wanted:
        return set()
    try:
        with current_app.pool.acquire(block=True, timeout=5) as connection:  # type: ignore[attr-defined]
            client = _redis_client(connection)
            if client is None:
                return set()
            keys = [CANCELLED_KEY.format(kind=kind, run=r, attempt=a) for r, a in wanted]
            found = client.mget(keys)
    except Exception as exc:  # noqa: BLE001 - a check that fails never stops a run
        log.warning("could not ask whether %s runs were cancelled: %s", kind, exc)
        return set()
    return {target for target, value in zip(wanted, found, strict=True) if value is not None}


def worker_status() -> dict[str, Any] | None:
    """The last sweep's look at the workers, for pages: None when unknown (no sweep has
    looked yet, or the broker cannot say)."""
    try:
        # As in count_delivery.
        with current_app.pool.acquire(block=True, timeout=1) as connection:  # type: ignore[attr-defined]
            client = _redis_client(connection)
            raw = client.get(STATUS_KEY) if client is not None else None
    except Exception:  # noqa: BLE001 - a page never fails for this
        return None
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def worker_notice(queue: str = "gpu") -> str:
    """What a page says about a queued or running run when no worker takes its work:
    "" when all is well or nothing is known."""
    status = worker_status()
    if not status:
        return ""
    age = time.time() - float(status.get("checked_at") or 0)
    if age > max(3 * settings.GYM_SWEEP_EVERY_SECONDS, 180):
        minutes = max(int(age // 60), 1)
        return (
            f"No worker is taking work: the storing worker (which also runs the sweep) has "
            f"not been heard from for {minutes} min, so results are not being stored. "
            "Whoever runs this site should check its workers."
        )
    info = (status.get("queues") or {}).get(queue) or {}
    if not info.get("workers"):
        waiting = int(info.get("waiting") or 0)
        return (
            "No worker is taking work: no scoring worker answered the last check"
            + (f", and {waiting} task(s) wait for one" if waiting else "")
            + ". This run starts when a worker is back; whoever runs this site should "
            "check its workers."
        )
    return ""
