"""Runs under faults, through real workers, the real broker and the real database: a
burst of simultaneous requests, the database locked while results are stored, the
broker's connections dropped mid-run, transient scoring errors. Every run ends done (or
failed with a reason), never stuck."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, ItemResult
from evaluations.runs import lifecycle as runs
from evaluations.runs import tasks
from evaluations.scoring import worker
from evaluations.syntaxgym import services
from suites.syntaxgym import services as suite_services
from tests.celery_harness import (
    REDIS_URL,
    broker,
    database_url,
    eager_tasks,
    wait_for_log,
)
from tests.conftest import small_suite, token_client
from tests.syntaxgym.test_evaluation_worker import _big_suite, _wait

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_eight_simultaneous_requests_give_no_5xx_and_every_run_completes(
    redis_broker, workers, tiny_gpt2, alice
) -> None:
    """Each request asks for two suites, each suite is asked for twice at once: the
    requests race to create the same rows while the workers store results."""
    suites = [
        suite_services.suite_import(source=small_suite(f"burst {n}"), owner=alice).suite
        for n in range(8)
    ]
    model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    token_client(alice)  # the token exists before the threads ask with it
    workers("celery")
    workers("gpu")
    start = threading.Barrier(8)

    def ask(n: int) -> tuple[int, list[int]]:
        client = token_client(alice)
        body = json.dumps({"model": "tiny", "suites": [suites[n].name, suites[(n + 1) % 8].name]})
        start.wait()
        try:
            response = client.post("/api/evaluations/", body, content_type="application/json")
        finally:
            connection.close()  # this thread's own connection
        ids = [e["id"] for e in response.json()] if response.status_code < 300 else []
        return response.status_code, ids

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    assert [code for code, _ in answers if code not in (200, 201)] == [], answers
    pks = sorted({pk for _, ids in answers for pk in ids})
    assert len(pks) == 8 == Evaluation.objects.count()
    finished = _wait(pks, timeout=300)
    assert [e.status for e in finished] == ["done"] * 8, [e.error for e in finished]
    assert all(ItemResult.objects.filter(evaluation=e).count() == 2 for e in finished)


class DatabaseLock:
    """Another client holding the write lock (SQLite) or an exclusive lock on the runs
    table (PostgreSQL), as a long migration or a backup would."""

    def __init__(self) -> None:
        settings = connection.settings_dict
        self.sqlite = settings["ENGINE"].endswith("sqlite3")
        self.name = settings["NAME"]
        self.held: Any = None

    def worker_env(self) -> dict[str, str]:
        """Make the storing worker give up waiting after about a second, so that the
        lock is a failure it must retry, not just a wait."""
        if self.sqlite:
            return {"GYM_SQLITE_BUSY_TIMEOUT": "1"}
        return {"DATABASE_URL": database_url() + "?options=-c%20lock_timeout%3D1000"}

    def acquire(self) -> None:
        held: Any
        if self.sqlite:
            held = sqlite3.connect(self.name, isolation_level=None, timeout=30)
            held.execute("BEGIN IMMEDIATE")
        else:
            import psycopg

            held = psycopg.connect(database_url())
            held.execute("LOCK TABLE evaluations_evaluation IN ACCESS EXCLUSIVE MODE")
        self.held = held

    def release(self) -> None:
        if self.held is not None:
            self.held.rollback()
            self.held.close()
            self.held = None


def test_a_database_failure_while_storing_is_retried_and_the_run_completes(
    redis_broker, workers, tiny_gpt2, alice, pace
) -> None:
    suite = _big_suite(400)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    lock = DatabaseLock()
    env = {"GYM_RUN_HOLD_DIR": str(pace.folder), "GYM_PROGRESS_EVERY_SECONDS": "0"}
    store = workers("celery", **env, **lock.worker_env())
    workers("gpu", **env)
    pace.hold()
    evaluation = services.evaluation_request(model=model, suites=[suite], user=alice).evaluations[0]
    pace.wait_held(evaluation)
    lock.acquire()
    try:
        pace.release()
        # Storing fails on the lock, and is sent again with back-off, more than once.
        wait_for_log(store, "runs.store", timeout=180)
        wait_for_log(store, "Retry in", timeout=180)
    finally:
        lock.release()
    (evaluation,) = _wait([evaluation.pk], timeout=300)
    assert evaluation.status == "done", evaluation.error
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 400


def test_broker_connections_dropped_mid_run_the_run_still_completes(
    redis_broker, workers, tiny_gpt2, alice, pace
) -> None:
    import redis

    suite = _big_suite(400)
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    env = {"GYM_RUN_HOLD_DIR": str(pace.folder), "GYM_PROGRESS_EVERY_SECONDS": "0"}
    workers("celery", **env)
    workers("gpu", **env)
    pace.hold()
    evaluation = services.evaluation_request(model=model, suites=[suite], user=alice).evaluations[0]
    pace.wait_held(evaluation)
    # Drop every connection to this test's Redis database (only ours: other databases
    # on the server are left alone), as a broker restart would.
    client = redis.Redis.from_url(REDIS_URL)
    db = client.connection_pool.connection_kwargs.get("db", 0)
    me = client.client_id()
    dropped = 0
    for entry in client.client_list():
        if int(entry["db"]) == int(db) and int(entry["id"]) != me:
            client.client_kill_filter(_id=entry["id"])
            dropped += 1
    client.close()
    assert dropped >= 2  # at least each worker's consumer
    pace.release()
    (evaluation,) = _wait([evaluation.pk], timeout=300)
    assert evaluation.status == "done", evaluation.error
    assert ItemResult.objects.filter(evaluation=evaluation).count() == 400


# A run kind whose worker function fails transiently before it succeeds: the registry is
# how a new kind plugs in, so a test kind exercises the same task code.
FLAKY_FAILURES: list[str] = []


def flaky_scoring(payload: dict, progress: Callable[[int, int], None] | None = None) -> dict:
    if len(FLAKY_FAILURES) < 2:
        FLAKY_FAILURES.append("out of memory")
        raise tasks.TransientScoringError("CUDA out of memory (a busy GPU)")
    return worker.run_scoring(payload, progress=progress)


def test_transient_scoring_errors_are_retried_with_back_off(tiny_gpt2, alice) -> None:
    suite = suite_services.suite_import(source=small_suite("flaky"), owner=alice).suite
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    kind = runs.RunKind(
        name="flaky-suite",
        model="evaluations.Evaluation",
        payload="evaluations.syntaxgym.services.scoring_payload",
        work="tests.runs.test_run_faults.flaky_scoring",
        store="evaluations.syntaxgym.services.suite_results_store",
    )
    runs.register(kind)
    FLAKY_FAILURES.clear()
    with broker("redis://127.0.0.1:1/0"):  # the request is recorded, not sent
        with pytest.raises(services.BrokerUnavailable):
            services.evaluation_request(model=model, suites=[suite], user=alice)
    evaluation = Evaluation.objects.get()
    try:
        with eager_tasks():  # the retries and the store run here
            tasks.work.apply(args=[kind.name, evaluation.pk, 1, kind.build_payload(evaluation)])
    finally:
        runs.KINDS.pop(kind.name)
    assert FLAKY_FAILURES == ["out of memory"] * 2
    evaluation.refresh_from_db()
    assert evaluation.status == "done", evaluation.error
    # The waits between attempts grow, up to a cap.
    delays = [tasks.retry_countdown(n) for n in range(8)]
    assert delays == sorted(delays) and delays[0] >= 1 and delays[-1] == 300
