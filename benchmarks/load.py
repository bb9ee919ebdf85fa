"""A bounded loopback load test of the default setup: reads and writes mixed, from several
concurrent clients, for a fixed time. Prints the number of requests, the 5xx count (the
target is 0), 429s, and p50/p95 latency overall and per kind of request.

The server is the run command's: gunicorn (two processes of four threads) with DEBUG off, on a throw-away
SQLite database and the private Redis broker (GYM_VAR_DIR in a temporary folder), the example
suites imported, a hub-id model registered. Evaluation requests are recorded and
published to the broker; no worker scores them here (scoring speed has its own
benchmarks), so the load is the web process's and the database's. Throttles are raised
for the run, since eight clients on one address are the point here, not an attack.

Only 127.0.0.1: the script starts its own server and talks to nothing else.

Usage: .venv/bin/python benchmarks/load.py [--clients 8] [--seconds 120] [--smoke]
       [--fail-on-5xx]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import agreement_suite  # noqa: E402

PY = sys.executable
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _environment(var_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "GYM_CACHE_URL"}
    }
    env |= {
        "GYM_VAR_DIR": str(var_dir),
        "HF_HUB_OFFLINE": "1",
        "GYM_THROTTLE_ANON": "100000/minute",
        "GYM_THROTTLE_USER": "100000/minute",
        "GYM_THROTTLE_ANON_VALIDATE": "100000/minute",
        "LOG_LEVEL": "ERROR",
    }
    return env


_SETUP = """
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from evaluations.language_models import registry as model_registry
tokens = []
for i in range({clients}):
    user = User.objects.create_user(f"load{{i}}", password="load-pass-1234")
    tokens.append(Token.objects.create(user=user).key)
model_registry.model_register(source="gpt2", name="gpt2")
print("TOKENS " + ",".join(tokens))
"""


def setup(env: dict[str, str], clients: int) -> list[str]:
    def manage(*args: str) -> str:
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    manage("migrate", "--noinput")
    manage("import_suites", "examples", "--on-conflict", "skip")
    out = manage("shell", "-c", _SETUP.format(clients=clients))
    line = next(line for line in out.splitlines() if line.startswith("TOKENS "))
    return line.removeprefix("TOKENS ").split(",")


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "gym.wsgi", "--bind", f"{HOST}:{port}", "--workers", "2"]
        + ["--threads", "4", "--graceful-timeout", "5", "--no-control-socket"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit("the server exited before answering") from None
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not start within 60 s")


@dataclass
class Site:
    """A running site (`site_served`): its port, one token per user, its folder, gunicorn's
    master process; the last traceback of its log is in `last_error` once it has stopped."""

    port: int
    tokens: list[str]
    var_dir: Path
    server_pid: int
    last_error: str = ""


@contextmanager
def site_served(clients: int, *, prefix: str = "gym-load-") -> Iterator[Site]:
    """The run command's server shape on a throw-away GYM_VAR_DIR: its private broker,
    `setup` (the examples, a model, `clients` users with tokens) and gunicorn. Stopped and
    its folder removed on the way out, an exception or Ctrl-C too."""
    var_dir = Path(tempfile.mkdtemp(prefix=prefix))
    env = _environment(var_dir)
    server = None
    site = None
    from gym.embedded import RedisServer

    # The run command's broker: requests publish their runs to it (no worker takes them).
    broker = RedisServer(var_dir)
    broker.start()
    try:
        tokens = setup(env, clients)
        port = free_port()
        server = start_server(env, port, var_dir / "server.log")
        site = Site(port, tokens, var_dir, server.pid)
        yield site
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        broker.stop()
        if site is not None:
            site.last_error = last_traceback(var_dir / "server.log")
        shutil.rmtree(var_dir, ignore_errors=True)


def last_traceback(log: Path) -> str:
    """The last exception the server logged, to say what a 5xx was ('' for none)."""
    errors = log.read_text(errors="replace").split("Traceback") if log.exists() else []
    return ("Traceback" + errors[-1])[-1500:] if len(errors) > 1 else ""


def example_suite_names() -> list[str]:
    """The names of the example suites `setup` imports."""
    suites = sorted(p.stem for p in (REPO / "examples").glob("*.json"))
    return [
        json.loads((REPO / "examples" / f"{s}.json").read_text())["meta"]["name"] for s in suites
    ]


def small_suite(name: str) -> dict[str, Any]:
    return agreement_suite(
        name, [(f"The {noun}", "here.") for noun in ("dog", "cat", "bird", "fox")]
    )


class Client(threading.Thread):
    """One user: a keep-alive connection, requests picked at random by weight."""

    def __init__(self, index: int, port: int, token: str, suites: list[str], until: float):
        super().__init__(daemon=True)
        self.index, self.port, self.token, self.suites, self.until = (
            index,
            port,
            token,
            suites,
            until,
        )
        self.samples: list[tuple[str, int, float]] = []
        self.random = random.Random(index)
        self.uploads = 0

    def _request(self, kind: str, method: str, path: str, body: Any = None) -> None:
        headers = {"Authorization": f"Token {self.token}"} if kind.startswith("api") else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        start = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
            conn.close()
        except OSError:
            status = 599  # no answer at all counts as a server error
        self.samples.append((kind, status, time.perf_counter() - start))

    def run(self) -> None:
        r = self.random
        while time.monotonic() < self.until:
            suite = r.choice(self.suites)
            quoted = suite.replace(" ", "%20")
            roll = r.random()
            if roll < 0.20:
                self._request("page: suite list", "GET", f"/?q={r.choice('aeiou')}")
            elif roll < 0.35:
                self._request("page: suite", "GET", f"/suites/{quoted}/")
            elif roll < 0.45:
                self._request("page: leaderboard", "GET", "/leaderboard/")
            elif roll < 0.55:
                self._request("api: suite list", "GET", "/api/suites/?search=a")
            elif roll < 0.65:
                self._request("api: suite detail", "GET", f"/api/suites/{quoted}/")
            elif roll < 0.75:
                self._request(
                    "api: validate", "POST", "/api/validate/suite/", small_suite("check me")
                )
            elif roll < 0.87:
                self.uploads += 1
                name = f"load {self.index} {self.uploads}"
                self._request("api: upload suite", "POST", "/api/suites/", small_suite(name))
            else:
                body = {"model": "gpt2", "suites": [suite]}
                self._request("api: request evaluation", "POST", "/api/evaluations/", body)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def latency_lines(
    samples: list[tuple[str, int, float]], *, kind_width: int, errors: str
) -> list[str]:
    """p50, p95 and mean latency of `samples` (kind, status, seconds), then a line a kind
    of request: how many, how many had a status of 500 or more (headed `errors`), p50
    and p95. Both load tests print these (load.py and soak.py)."""
    latencies = [t for _k, _s, t in samples]
    lines = [
        f"latency       p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
        f"p95 {percentile(latencies, 0.95) * 1000:.0f} ms, "
        f"mean {statistics.fmean(latencies) * 1000 if latencies else 0:.0f} ms"
    ]
    by_kind: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for kind, status, took in samples:
        by_kind[kind].append((status, took))
    for kind in sorted(by_kind):
        times = [t for _s, t in by_kind[kind]]
        bad = sum(1 for s, _t in by_kind[kind] if s >= 500)
        lines.append(
            f"  {kind:{kind_width}} n={len(times):5}  {errors}={bad:3}  "
            f"p50 {percentile(times, 0.5) * 1000:6.0f} ms  p95 {percentile(times, 0.95) * 1000:6.0f} ms"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--smoke", action="store_true", help="8 clients for 8 seconds (CI)")
    parser.add_argument("--fail-on-5xx", action="store_true", help="exit 1 on any 5xx")
    args = parser.parse_args()
    if args.smoke:
        args.seconds = 8.0

    with site_served(args.clients) as site:
        names = example_suite_names()
        until = time.monotonic() + args.seconds
        clients = [Client(i, site.port, site.tokens[i], names, until) for i in range(args.clients)]
        started = time.monotonic()
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        elapsed = time.monotonic() - started

    samples = [s for c in clients for s in c.samples]
    statuses = Counter(status for _k, status, _t in samples)
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    print(f"load: {args.clients} clients for {elapsed:.0f} s against http://{HOST}:{site.port}/")
    print(f"requests      {len(samples)} ({len(samples) / elapsed:.1f}/s)")
    print(f"5xx           {server_errors}   (target 0)")
    print(f"429           {statuses.get(429, 0)}")
    print("statuses      " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    for line in latency_lines(samples, kind_width=26, errors="5xx"):
        print(line)
    if server_errors and site.last_error:
        print("the last server error:\n" + site.last_error)
    if not samples:
        print("no request completed", file=sys.stderr)
        return 1
    return 1 if args.fail_on_5xx and server_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
