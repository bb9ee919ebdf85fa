"""One process of the site killed at any moment, as the OOM killer or a crash would:
the site started exactly as `bash scripts/run.sh` starts it (`python -m gym.embedded`),
in both shapes: the embedded default (SQLite, the private Redis) and the production
shape (PostgreSQL, a Redis of its own). After each fault a new run is requested and must
be done, and a run that was being scored when its worker died is stored exactly once.

GYM_FAULT_ROUNDS repeats the faults within one site (1 in CI; 20 to prove it holds
twenty times in a row: see benchmarks/README.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.celery_harness import REDIS_URL, LineProcess, redis_or_skip
from tests.conftest import REPO
from tests.site_processes import session_processes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROUNDS = int(os.environ.get("GYM_FAULT_ROUNDS", "1"))
# Several batches of the tiny baseline (the engine reports after each, and the hold file
# keeps it there), so that a run is held mid-way: scored (more than once) and stored
# three times a round in both shapes, so no longer than that.
LONG_ITEMS = 120


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Generous: on a loaded two-core machine a restarted worker takes minutes to import torch,
# load its model and reach its first batch. A wedge still fails the test, only later.
def _until(what: str, check: Any, timeout: float = 600, site: Site | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if site is not None and site.process.poll() is not None:
            raise AssertionError(f"the site exited while waiting for {what}: {site.story()}")
        time.sleep(0.3)
    raise AssertionError(f"gave up waiting for {what}" + (f": {site.story()}" if site else ""))


class Site:
    """`python -m gym.embedded` in a throw-away var folder, paced by a hold file."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.hold_dir = folder / "pace"
        self.hold_dir.mkdir(parents=True)
        self.port = _free_port()
        self.log = folder / "site.log"
        self.ops_log = folder / "site_ops.log"
        self.ops_process: LineProcess | None = None
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
        } | {
            "GYM_VAR_DIR": str(folder / "var"),
            "PORT": str(self.port),
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "GYM_SWEEP_EVERY_SECONDS": "2",
            "GYM_SWEEP_ORPHAN_AFTER": "6",
            "GYM_LIVENESS_EVERY_SECONDS": "2",
            "GYM_WEDGED_AFTER": "10",
            "GYM_STOP_GRACE": "5",
            "GYM_PROGRESS_EVERY_SECONDS": "0",
            "GYM_RUN_HOLD_DIR": str(self.hold_dir),
            **env,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gym.embedded"],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def story(self, chars: int = 12000) -> str:
        """The end of the site's log for a failure's message, without the sweep's lines
        (one every two seconds, which would leave nothing else in a plain tail)."""
        lines = self.log.read_text(errors="replace").splitlines(keepends=True)
        told = "".join(line for line in lines if "runs.sweep" not in line)
        return told[-chars:]

    def ops(self, *args: object) -> Any:
        """One operation of tests/site_ops.py, asked of the one `serve` process this site
        keeps (started at the first question, again if it has ended)."""
        if self.ops_process is None or not self.ops_process.alive():
            serve = ["tests/site_ops.py", "serve"]
            self.ops_process = LineProcess(serve, self.env, log=self.ops_log)
        line = self.ops_process.ask(json.dumps([str(arg) for arg in args]), timeout=120)
        assert line, f"site_ops {args} gave no answer: {self.ops_log.read_text()[-3000:]}"
        answer = json.loads(line)
        assert "error" not in answer, f"site_ops {args}: {answer['error']}"
        return answer["answer"]

    def close_ops(self) -> None:
        if self.ops_process is not None:
            self.ops_process.close()
            self.ops_process = None

    def page(self, path: str) -> str:
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback
                f"http://127.0.0.1:{self.port}{path}", timeout=10
            ) as response:
                return response.read().decode()
        except OSError:
            return ""

    def processes(self, marker: str) -> dict[int, int]:
        """pid -> process group of the site's processes whose command line holds
        `marker`."""
        return session_processes(self.process.pid, marker)

    def main_and_pool(self, marker: str) -> tuple[int, int]:
        """A worker's main process (the leader of its group) and its one pool process."""

        def both() -> tuple[int, int] | None:
            found = self.processes(marker)
            main = [pid for pid, group in found.items() if pid == group]
            pool = [pid for pid, group in found.items() if pid != group]
            return (main[0], pool[0]) if len(main) == 1 and len(pool) == 1 else None

        return _until(f"the {marker} worker and its pool process", both, site=self)

    def hold(self) -> None:
        (self.hold_dir / "hold").touch()

    def release(self) -> None:
        (self.hold_dir / "hold").unlink(missing_ok=True)

    def state(self, run: int) -> dict[str, Any]:
        """The run as the site's API tells it (cheap enough to poll)."""
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback
                f"http://127.0.0.1:{self.port}/api/evaluations/{run}/", timeout=10
            ) as response:
                data = json.loads(response.read())
        except OSError:
            return {"status": "unknown"}
        started = data.get("started_at")
        data["started"] = datetime.fromisoformat(started).timestamp() if started else None
        return data

    def wait_done(self, run: int, timeout: float = 300) -> dict[str, Any]:
        """Until the run is finished; it must be done. With its stored item count."""
        last: list[dict[str, Any]] = [{}]

        def finished() -> dict[str, Any] | None:
            last[0] = state = self.state(run)
            return state if state["status"] in ("done", "failed", "cancelled") else None

        try:
            state = _until(f"run {run} to finish", finished, timeout=timeout, site=self)
        except AssertionError as stuck:
            raise AssertionError(f"run {run} as the API last told it: {last[0]}\n{stuck}") from None
        assert state["status"] == "done", state
        return self.ops("run", run)

    def wait_held(self, run: int, after: float | None = None) -> dict[str, Any]:
        def held() -> dict[str, Any] | None:
            state = self.state(run)
            assert state["status"] not in ("done", "failed", "cancelled"), state
            mid_way = (
                state["status"] == "running"
                and 0 < state["progress_done"] < state["progress_total"]
            )
            fresh = after is None or (state["started"] or 0) > after
            return state if mid_way and fresh else None

        return _until(f"run {run} held mid-way", held, site=self)

    def stop(self) -> float:
        """Ctrl-C, as a terminal sends it; returns the seconds until every process of the
        site is gone."""
        start = time.monotonic()
        try:
            os.kill(self.process.pid, signal.SIGINT)
            self.process.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        _until("every process of the site to end", lambda: not self.processes(""), timeout=60)
        return time.monotonic() - start

    def kill_all(self) -> None:
        for pid in self.processes(""):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _postgres_url() -> str | None:
    """A fresh database on the tests' PostgreSQL, or None when there is none here."""
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        return None
    import psycopg

    name = f"gym_faults_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def _drop_postgres(url: str) -> None:
    import psycopg

    base, name = os.environ["DATABASE_URL"], url.rsplit("/", 1)[1]
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["embedded", "production"])
def site(request: Any, tmp_path: Path) -> Iterator[Site]:
    env: dict[str, str] = {}
    database = None
    if request.param == "production":
        database = _postgres_url()
        if database is None:
            if os.environ.get("CI"):
                raise RuntimeError("CI needs PostgreSQL (DATABASE_URL) for the production shape")
            pytest.skip("no PostgreSQL (DATABASE_URL) for the production shape")
        redis_or_skip()
        env = {"DATABASE_URL": database, "CELERY_BROKER_URL": REDIS_URL}
    running = Site(tmp_path, env)
    try:
        _until("the site", lambda: "Gym is starting" in running.tail(), timeout=600, site=running)
        yield running
    finally:
        running.close_ops()
        running.release()
        running.kill_all()
        if database:
            _drop_postgres(database)
        if request.param == "production":
            from tests.celery_harness import flush_redis

            flush_redis()


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def _kill_pool(site: Site, worker: str) -> None:
    """SIGKILL the pool process of the worker `worker` names (e.g. "gym-score@"); its main
    process lives on."""
    _, pool = site.main_and_pool(worker)
    _kill(pool)


def _killed_mid_run(site: Site, kill: Callable[[], None]) -> dict[str, Any]:
    """A long run held while it is scored, `kill()` then: the run is scored again from a
    later start and finishes; its state at the end."""
    site.hold()
    long_run = site.ops("queue", LONG_ITEMS)["run"]
    first = site.wait_held(long_run)
    kill()
    site.wait_held(long_run, after=first["started"])
    site.release()
    return site.wait_done(long_run)


def _one_round(site: Site) -> None:
    # 1. The scoring worker's pool process, idle.
    _kill_pool(site, "gym-score@")
    run = site.ops("queue", 10)["run"]
    assert site.wait_done(run)["stored_items"] == 10

    # 2. The scoring worker's pool process, busy: the message goes back to the queue
    # (WorkerLostError) and the new pool process scores the run from the start.
    state = _killed_mid_run(site, lambda: _kill_pool(site, "gym-score@"))
    assert state["stored_items"] == LONG_ITEMS
    assert state["done"] == state["total"] == LONG_ITEMS * 4

    # 3. The storing worker's pool process, idle.
    _kill_pool(site, "gym-store@")
    run = site.ops("queue", 10)["run"]
    assert site.wait_done(run)["stored_items"] == 10

    # 4. Celery beat: started again; the sweep goes on.
    (beat,) = site.processes("celery -A gym beat")
    _kill(beat)
    _until("beat again", lambda: set(site.processes("celery -A gym beat")) - {beat}, site=site)
    sweeps = site.tail(10**9).count("Sending due task sweep")
    _until(
        "a sweep from the new beat",
        lambda: site.tail(10**9).count("Sending due task sweep") > sweeps,
        site=site,
    )
    run = site.ops("queue", 10)["run"]
    assert site.wait_done(run)["stored_items"] == 10

    # 5. The whole scoring worker (main and pool process) while it scores: its message
    # stays with the broker as unacknowledged for hours; the sweep finds the run that
    # nobody holds and sends it again.
    def kill_whole_worker() -> None:
        main, _ = site.main_and_pool("gym-score@")
        os.killpg(main, signal.SIGKILL)

    state = _killed_mid_run(site, kill_whole_worker)
    assert state["stored_items"] == LONG_ITEMS

    # 6. A wedged scoring worker (alive, answering nothing): the page says so, the
    # supervisor starts it again, and the run is done.
    main, _ = site.main_and_pool("gym-score@")
    os.kill(main, signal.SIGSTOP)
    run = site.ops("queue", 10)["run"]
    _until(
        "the run page to say that no worker takes work",
        lambda: "No worker is taking work" in site.page(f"/evaluations/{run}/"),
        site=site,
    )
    assert site.wait_done(run)["stored_items"] == 10

    # 7. A scoring worker alive and answering, but taking nothing from its queue (its
    # consumer cancelled by a real control command): started again, the run is done.
    site.ops("stop-consuming", "gpu", "gym-score@")
    run = site.ops("queue", 10)["run"]
    assert site.wait_done(run)["stored_items"] == 10


def test_any_one_process_killed_every_run_finishes_once(site: Site) -> None:
    for _round in range(ROUNDS):
        _one_round(site)

    # Nothing is left behind: every run of every kind (the examples' included) finished.
    _until("every run to finish", lambda: not any(site.ops("open").values()), site=site)
    log = site.tail(10**9)
    assert "score is alive but answered no control message" in log
    assert "score is alive but took no message" in log
    assert "beat exited with status -9" in log
    assert "Traceback" not in log.split("Gym is starting")[0]
    # Ctrl-C stops it all well within 30 s, even with a run mid-way and the scoring
    # worker wedged (a warm shutdown alone would wait for the run).
    site.hold()
    long_run = site.ops("queue", LONG_ITEMS)["run"]
    site.wait_held(long_run)
    main, _ = site.main_and_pool("gym-score@")
    os.kill(main, signal.SIGSTOP)
    assert site.stop() < 30
