"""Real Celery workers for the integration tests: a subprocess running the project's
worker against the real Redis broker and the test database."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from gym.celery import app as celery_app
from tests.worker_zygote import READ_AT_IMPORT

REPO = Path(__file__).resolve().parents[1]


def _redis_url_of_this_process() -> str:
    """GYM_TEST_REDIS_URL names the Redis database of the tests' real brokers. Run in
    several processes (pytest-xdist), process gwN takes the N-th database after it, so
    that no two processes' workers share a queue or a flush: with the default 11, gw0
    uses 11, gw1 12, and so on."""
    url = os.environ.get("GYM_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    base, _, db = url.rpartition("/")
    if not db.isdigit():
        base, db = url.rstrip("/"), "0"
    number = int(db) + int(worker.removeprefix("gw"))
    if number > 15:
        raise RuntimeError(
            f"test process {worker} would use Redis database {number} after {url}: Redis "
            "has 16 (0-15); give GYM_TEST_REDIS_URL a lower database or run fewer processes"
        )
    return f"{base}/{number}"


REDIS_URL = _redis_url_of_this_process()


def redis_or_skip() -> str:
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs Redis at {REDIS_URL}: {exc}") from exc
        pytest.skip(f"Redis not reachable at {REDIS_URL}")
    client.flushdb()
    client.close()
    return REDIS_URL


def flush_redis() -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    client.close()


@contextmanager
def broker(url: str) -> Iterator[None]:
    """Point this process's Celery app at `url` (publishing side) for a while."""
    before = celery_app.conf.broker_url
    before_opts = dict(celery_app.conf.broker_transport_options or {})
    _switch(url, {"visibility_timeout": 3600} if url.startswith("redis") else before_opts)
    try:
        yield
    finally:
        _switch(before, before_opts)


@contextmanager
def eager_tasks() -> Iterator[None]:
    """Tasks sent inside the block run at once, here, in this process (Celery's
    task_always_eager), not through a broker."""
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


def _switch(url: str, options: dict) -> None:
    from kombu import pools

    # Drop every connection and producer pool made for the old broker: private state that
    # celery-types leaves out.
    pools.reset()  # type: ignore[attr-defined]
    celery_app._pool = None  # type: ignore[attr-defined]
    celery_app.conf.broker_url = url
    celery_app.conf.broker_transport_options = options
    celery_app.amqp._producer_pool = None  # type: ignore[attr-defined]


def database_url() -> str:
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"


class ForkedWorker:
    """A worker forked by the fork server (tests/worker_zygote.py), asked after as a
    subprocess.Popen is: pid, poll(), wait(). It leads its own session."""

    def __init__(self, pid: int, exit_file: Path) -> None:
        self.pid = pid
        self.exit_file = exit_file
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.exit_file.exists():
            self.returncode = int(self.exit_file.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            time.sleep(0.05)
        return code


class LineProcess:
    """A helper process of the tests spoken to a line at a time over its standard input
    and output (the fork server; a fault-test site's tests/site_ops.py): `argv` after
    the interpreter, run in the repository; its standard error appended to `log`; it
    ends when its input does."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path | None = None) -> None:
        errors = log.open("a") if log is not None else None
        try:
            self.process = subprocess.Popen(
                [sys.executable, *argv],
                cwd=REPO,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        finally:
            if errors is not None:
                errors.close()  # the process has its own

    def alive(self) -> bool:
        return self.process.poll() is None

    def read(self, timeout: float | None = None) -> str:
        """Its next line; "" if it wrote none within `timeout` seconds, or ended."""
        out = self.process.stdout
        assert out is not None
        if timeout is not None and not select.select([out], [], [], timeout)[0]:
            return ""
        return out.readline()

    def ask(self, line: str, timeout: float | None = None) -> str:
        """Write `line`, read its answer (as `read`)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.read(timeout)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # its input ends: it exits
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ForkServer(LineProcess):
    """tests/worker_zygote.py, running for this test process: it has imported torch and
    transformers once, and forks each worker from itself."""

    def __init__(self) -> None:
        # What every worker's environment adds that its libraries read at import.
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        super().__init__(["-m", "tests.worker_zygote"], self.env)
        ready, _, read = self.read().strip().partition(" ")
        if ready != "ready":
            raise RuntimeError(f"the fork server did not start: {self.process.wait()}")
        # The environment variables its libraries read through os.environ when imported.
        self.read_at_import = frozenset(json.loads(read))

    def imported_as(self, env: dict[str, str]) -> bool:
        """Did the fork server import its libraries with what `env` says they read?"""

        def read(of: dict[str, str]) -> dict[str, str | None]:
            keys = {key for key in of if key.startswith(READ_AT_IMPORT)} | self.read_at_import
            return {key: of.get(key) for key in keys}

        return read(env) == read(self.env)

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> ForkedWorker:
        exit_file = log.with_suffix(".exit")
        log.write_text("")  # there before the worker writes to it
        request = {"argv": argv, "env": env, "log": str(log), "exit": str(exit_file)}
        answer = self.ask(json.dumps(request)).strip()
        if not answer.isdigit():
            raise RuntimeError(f"the fork server did not fork a worker: {answer!r}")
        return ForkedWorker(int(answer), exit_file)


_FORK_SERVER: list[ForkServer] = []


def fork_server() -> ForkServer:
    """This test process's fork server, started on first use, ended at exit."""
    if not _FORK_SERVER or not _FORK_SERVER[0].alive():
        _FORK_SERVER[:] = [ForkServer()]
        atexit.register(_FORK_SERVER[0].close)
    return _FORK_SERVER[0]


def role_environment(**env: str) -> dict[str, str]:
    """The environment of a process of the site under test (a worker, beat, the web
    server): this one's, the tests' broker and database, and `env`."""
    return {
        **os.environ,
        "CELERY_BROKER_URL": REDIS_URL,
        "DATABASE_URL": database_url(),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        **env,
    }


def spawn(
    command: list[str], env: dict[str, str], log: Path, launcher: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`command` run in the repository after `launcher` (a prefix that execs it, such as
    one that gives it a mount namespace of its own), its output in `log`, leading its
    own process group, so that a kill takes its children."""
    with log.open("w") as out:
        return subprocess.Popen(
            [*launcher, *command],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_group(process: subprocess.Popen[bytes] | ForkedWorker, grace: float = 30) -> None:
    """SIGTERM a process started by `spawn` (or forked) and its group; SIGKILL after
    `grace` seconds."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        kill_group(process)


def kill_group(process: subprocess.Popen[bytes] | ForkedWorker) -> None:
    """SIGKILL the process and its group, as a crashed machine would."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


class Worker:
    def __init__(
        self,
        log_dir: Path,
        queues: str = "celery,gpu",
        *,
        launcher: Sequence[str] = (),
        **env: str,
    ) -> None:
        """A worker process for `queues`; production runs one for `celery` (storing,
        progress) and GPU workers for `gpu`, the embedded default one of each. With a
        `launcher` (see `spawn`) it is started through it, never forked."""
        self.name = f"test-{uuid.uuid4().hex[:8]}@localhost"
        self.log = log_dir / f"{self.name.split('@')[0]}.log"
        environment = role_environment(**env)
        argv = [
            "-A",
            "gym",
            "worker",
            "--loglevel",
            "INFO",
            "--queues",
            queues,
            "--concurrency",
            "1",
            "--pool",
            "prefork",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            self.name,
        ]
        self.process: subprocess.Popen[bytes] | ForkedWorker
        # Threads or hub settings of its own: a worker forked from libraries imported
        # with other ones would not have them (no fork server is started for it).
        own = any(key.startswith(READ_AT_IMPORT) for key in env) or bool(launcher)
        if not own and (server := fork_server()).imported_as(environment):
            self.process = server.start(argv, environment, self.log)
        else:
            self.process = spawn(
                [sys.executable, "-m", "celery", *argv], environment, self.log, launcher
            )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log.read_text()[-3000:]}")
            if " ready." in self.log.read_text():
                return
            time.sleep(0.3)
        raise RuntimeError(f"worker not ready after {timeout}s: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the worker and its pool children, as a crashed machine would."""
        kill_group(self.process)

    def stop(self) -> None:
        stop_group(self.process)


class Pace:
    """The test's hand on a worker's pace (the GYM_RUN_HOLD_DIR hook): while held, a run
    stops after its first batch, with its progress reported, until released."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def hold(self) -> None:
        (self.folder / "hold").touch()

    def release(self) -> None:
        (self.folder / "hold").unlink(missing_ok=True)

    def wait_held(self, evaluation: Any, *, after: object = None, timeout: float = 120) -> Any:
        """Until the run is running mid-way (a delivery that started after `after`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            evaluation.refresh_from_db()
            assert not evaluation.finished, evaluation.error
            if (
                evaluation.status == "running"
                and 0 < evaluation.progress_done < evaluation.progress_total
                and (after is None or evaluation.started_at > after)
            ):
                return evaluation
            time.sleep(0.1)
        raise AssertionError(f"the run never got held mid-way: {evaluation.status}")


def redelivery_env(settings: Any, pace: Pace) -> dict[str, str]:
    """The environment of workers held by `pace` whose killed delivery Redis hands on to
    another: after the visibility timeout, which must outlast the hard time limit. The
    limit still leaves room: a gpu worker has imported torch and transformers before it
    takes a message (preload_transformers), and the deliveries these tests hold end
    within about ten seconds on a busy two-core machine; each second of the timeout is
    a second the test waits. Sets that limit for this process too."""
    settings.CELERY_TASK_HARD_TIME_LIMIT = 30
    return {
        "CELERY_TASK_HARD_TIME_LIMIT": "30",
        "CELERY_VISIBILITY_TIMEOUT": "35",
        "CELERY_RESTORE_INTERVAL": "2",
        "GYM_PROGRESS_EVERY_SECONDS": "0",
        "GYM_RUN_HOLD_DIR": str(pace.folder),
    }


def wait_finished(model: Any, pk: int, *, what: str, timeout: float = 300) -> Any:
    """Run `pk` of `model` once it is finished (what a worker did, not how fast); `what`
    names it in the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = model.objects.get(pk=pk)
        if run.finished:
            return run
        time.sleep(0.5)
    raise AssertionError(f"{what} not finished after {timeout}s: {run.status}")


def until(what: str, check: Callable[[], Any], *, timeout: float = 300, every: float = 0.3) -> Any:
    """The first true value of `check()`, asked every `every` seconds (what happened, not
    how fast); `what` names it in the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(every)
    raise AssertionError(f"gave up waiting for {what} ({timeout} s)")


def wait_for_log(worker: Worker, text: str, timeout: float = 120) -> None:
    """Until the worker's log shows `text` (what a worker did, not how fast)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in worker.log.read_text():
            return
        if worker.process.poll() is not None:
            raise RuntimeError(f"worker exited: {worker.log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in the worker's log: {worker.log.read_text()[-3000:]}")


# Fixtures of the tests that run real workers (registered for every module by conftest).


@pytest.fixture
def redis_broker() -> Iterator[str]:
    """The site's broker switched to the tests' Redis database for one test."""
    url = redis_or_skip()
    with broker(url):
        yield url
    flush_redis()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Any]:
    """start(queues="celery,gpu", *, launcher=(), **env) starts a worker (through
    `launcher`, see `spawn`) and waits until it is ready; every worker started is
    stopped after the test."""
    started: list[Worker] = []

    def start(queues: str = "celery,gpu", *, launcher: Sequence[str] = (), **env: str) -> Worker:
        worker = Worker(tmp_path, queues, launcher=launcher, **env)
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def pace(tmp_path: Path) -> Iterator[Pace]:
    """Holds workers started with GYM_RUN_HOLD_DIR=pace.folder after each progress report."""
    controller = Pace(tmp_path / "pace")
    yield controller
    controller.release()
