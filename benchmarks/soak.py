"""A bounded soak test: the whole site on loopback under several clients at once, while
its processes and services are made to fail on a schedule; then checks that every run
finished once, with the values a clean run gives.

Two shapes, both started as `bash scripts/run.sh` starts the site (`python -m
gym.embedded`, whose supervisor starts a dead process again, as systemd would in
production):

- `--shape production` (the default): PostgreSQL (a throw-away database this script
  creates and drops WITH (FORCE)), a private redis-server on a free loopback port with an
  append-only file (so that it can be killed and started again on the same port and
  file), gunicorn with WhiteNoise, a storing worker, beat and two scoring workers
  (GYM_SCORE_WORKERS=2).
- `--shape embedded`: the embedded default exactly: SQLite and the site's own private
  Redis (on a socket in its var folder, a service of the supervisor).

Clients sign in for a token, upload suites, minimal-pair sets and probing tasks (valid
ones, and broken ones, which must get 400 with a message), ask for runs of the baseline
models (the random GPT-2 and the CMU trigram that bootstrap registers) on them, cancel
and retry some, replace a suite's content while it is being run, read pages and exports
and poll progress.

Faults, one at a time at even intervals: SIGKILL to a scoring worker's pool process while
it scores, to a whole scoring worker, to the storing worker while runs are in flight;
Redis killed with -9 and started again on its append-only file; PostgreSQL "restarted"
as its clients see it, without touching the server: every connection to the soak's own
database is ended with pg_terminate_backend (the server and other databases are left
alone); the results folder's disk filled (a small tmpfs mounted on it, filled to the
last byte for a while; "skipped: cannot mount" when mounting is refused); SIGTERM to
gunicorn's master.

Then, once the queues are quiet (bounded), it prints: runs by kind and status (0
stuck, every failure with a reason), results stored once (no duplicate rows; a done
suite run has one item row per item), stored values against `manage.py score` computed
fresh on the same content, responses by status (no 5xx but 503 while the broker is
down or the database restarts; no answer only while gunicorn restarts), p50/p95
latency, faults injected and survived.

Only 127.0.0.1, and only what it starts: its own database, Redis, tmpfs and folders,
removed at the end, on failure and on Ctrl-C too.

Usage: .venv/bin/python benchmarks/soak.py [--shape production|embedded] [--minutes 10]
       [--clients 6] [--smoke] [--fail-on-problems] [--postgres URL]
       (the production shape needs a PostgreSQL server: DATABASE_URL, --postgres, or
       postgres://postgres@127.0.0.1:5432/postgres; its redis-server is the one the site
       runner would use, gym.embedded.redis_server_binary)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.end_to_end import agreement_suite  # noqa: E402 - after the path
from benchmarks.load import free_port, latency_lines  # noqa: E402 - after the path
from gym.embedded import redis_server_binary  # noqa: E402 - after the path
from tests.site_processes import session_processes  # noqa: E402 - after the path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
HOST = "127.0.0.1"
BASELINE = "random-baseline"
TRIGRAM = "cmu-us-english-trigram"
PASSWORD = "soak-pass-1234"
# A 503 or no answer this long after a fault's window closes still belongs to it (a
# client's request started before the service came back).
GRACE = 15.0
# A client asks for no more runs while this many of its own are queued or running.
MAX_OPEN_RUNS = 4


def say(message: str) -> None:
    print(f"soak: {message}", flush=True)


# ---- what the clients send ------------------------------------------------------------

NOUNS = ["dog", "cat", "bird", "fox", "key", "pilot", "senator", "student", "table", "author"]


def suite_document(name: str, items: int, verb: str = "is") -> dict[str, Any]:
    """A small agreement suite; `verb` changes its content (a replace)."""
    plural = {"is": "are", "was": "were"}[verb]
    subjects = (
        f"The {NOUNS[n % len(NOUNS)]} near the {NOUNS[(n // len(NOUNS)) % len(NOUNS)]}s"
        for n in range(1, items + 1)
    )
    return agreement_suite(
        name, [(subject, "here today.") for subject in subjects], verbs=(verb, plural)
    )


def broken_suite(name: str) -> dict[str, Any]:
    document = suite_document(name, 2)
    document["predictions"] = [{"type": "formula", "formula": "(2;%nowhere%) >"}]
    return document


def pair_tsv(pairs: int) -> str:
    lines = ["sentid\tpairid\tcomparison\tsentence\tROI\tphenomenon"]
    for n in range(pairs):
        noun, other = NOUNS[n % len(NOUNS)], NOUNS[(n // len(NOUNS)) % len(NOUNS)]
        good, bad = ("is", "are") if n % 2 else ("are", "is")
        number = "s" if n % 2 == 0 else ""
        for k, (comparison, verb) in enumerate((("expected", good), ("unexpected", bad))):
            sentence = f"The {noun}{number} near the {other} {verb} here."
            lines.append(f"{2 * n + k + 1}\t{n + 1}\t{comparison}\t{sentence}\t4\tagreement")
    return "\n".join(lines) + "\n"


def broken_pair_tsv() -> str:
    return "sentid\tpairid\tsentence\n1\t1\tThe dog is here.\n2\tx\tThe dog are here.\n"


def probing_text(per_partition: int) -> str:
    lines = []
    for partition in ("tr", "va", "te"):
        for n in range(per_partition):
            noun = NOUNS[n % len(NOUNS)]
            label, verb = ("PL", "were") if n % 2 else ("SG", "was")
            noun = noun + "s" if label == "PL" else noun
            lines.append(f"{partition}\t{label}\tThe {noun} {verb} in the kitchen .")
    return "\n".join(lines) + "\n"


def broken_probing_text() -> str:
    return "tr\tSG\tThe dog was here .\nxx\n"


# ---- the site and its services --------------------------------------------------------


class Redis:
    """The production shape's broker: a redis-server of this script's own on loopback,
    its queues in an append-only file, so that it can be killed and started again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self) -> None:
        binary = redis_server_binary()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", HOST, "--dir", str(self.folder)]
            + ["--appendonly", "yes", "--save", "", "--daemonize", "no"]
            + ["--loglevel", "warning", "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._answers():
                return
            if self.process.poll() is not None:
                raise SystemExit(f"redis-server exited with status {self.process.returncode}")
            time.sleep(0.1)
        raise SystemExit("redis-server did not answer within 30 s")

    def _answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class Postgres:
    """A throw-away database on an existing PostgreSQL server; the server is never
    touched (a "restart" ends this database's connections only)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.name = f"gym_soak_{uuid.uuid4().hex[:10]}"
        self.url = base.rsplit("/", 1)[0] + "/" + self.name
        self.created = False

    def _run(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.base, autocommit=True, connect_timeout=10) as connection:
            cursor = connection.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def create(self) -> None:
        self._run(f'CREATE DATABASE "{self.name}"')
        self.created = True

    def terminate(self) -> int:
        """End every connection to this database but the one asking."""
        rows = self._run(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.name}' AND pid <> pg_backend_pid()"
        )
        return sum(1 for (ended,) in rows if ended)

    def drop(self) -> None:
        if self.created:
            self._run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            self.created = False


class ResultsDisk:
    """A small tmpfs on the results folder, to fill to the last byte for a while."""

    def __init__(self, folder: Path, size_mb: int) -> None:
        self.folder, self.size_mb = folder, size_mb
        self.mounted = False
        self.why = ""

    def mount(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.folder)],
            capture_output=True,
            text=True,
        )
        self.mounted = done.returncode == 0
        self.why = (done.stderr or done.stdout).strip().splitlines()[-1:] if done.returncode else ""

    def fill(self) -> int:
        """Bytes written until the disk was full."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with (self.folder / "soak-filler").open("wb") as filler:
            try:
                while True:
                    filler.write(chunk)
                    filler.flush()
                    written += len(chunk)
            except OSError:
                pass
        return written

    def free(self) -> None:
        (self.folder / "soak-filler").unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True)
            self.mounted = False


class Site:
    """`python -m gym.embedded` in a session of its own, its output in a log."""

    def __init__(self, folder: Path, env: dict[str, str], port: int) -> None:
        self.folder, self.env, self.port = folder, env, port
        self.log = folder / "site.log"
        self.process = subprocess.Popen(
            [PY, "-m", "gym.embedded"],
            cwd=REPO,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the site exited while starting:\n{self.text()[-3000:]}")
            if "Gym is starting" in self.text() and self.answers():
                return
            time.sleep(0.5)
        raise SystemExit(f"the site did not start within {timeout:.0f} s:\n{self.text()[-3000:]}")

    def answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection(HOST, self.port, timeout=10)
            conn.request("GET", "/api/tags/")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def processes(self, marker: str) -> dict[int, int]:
        """pid -> process group of the site's live processes whose command line holds
        `marker`."""
        return session_processes(self.process.pid, marker)

    def leader(self, marker: str) -> int | None:
        """The main process of a service (the leader of its process group)."""
        leaders = [pid for pid, group in self.processes(marker).items() if pid == group]
        return leaders[0] if leaders else None

    def pool(self, marker: str) -> int | None:
        pools = [pid for pid, group in self.processes(marker).items() if pid != group]
        return pools[0] if pools else None

    def stop(self) -> None:
        try:
            os.kill(self.process.pid, signal.SIGINT)
            self.process.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        for pid in self.processes(""):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def manage(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [PY, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


_USERS = """
from django.contrib.auth.models import User
for i in range({clients}):
    User.objects.create_user(f"soak{{i}}", password="{password}")
User.objects.create_user("soak-watch", password="{password}", is_staff=True)
print("USERS OK")
"""


# ---- what happened --------------------------------------------------------------------


@dataclass
class Window:
    """A span of time during which some failed answers are expected."""

    what: str  # "broker" or "web" or "database"
    start: float
    end: float = float("inf")


@dataclass
class Record:
    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: list[tuple[str, int, float, float]] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    runs: list[tuple[str, int]] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, status: int, took: float, at: float) -> None:
        with self.lock:
            self.samples.append((kind, status, took, at))

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def within(self, what: str, at: float, took: float) -> bool:
        return any(
            w.what == what and w.start - took - 1 <= at <= w.end + GRACE for w in self.windows
        )


def classify(record: Record) -> Counter[str]:
    """Each answer as ok / 4xx / a 503 while the broker was down or the database restarted
    / no answer while the web server restarted / a server error (a problem)."""
    counts: Counter[str] = Counter()
    for _kind, status, took, at in record.samples:
        if status < 400:
            counts["2xx/3xx"] += 1
        elif status < 500:
            counts["4xx"] += 1
        elif status == 503 and record.within("broker", at, took):
            counts["503 while the broker was down"] += 1
        elif status == 503 and record.within("database", at, took):
            counts["503 while the database restarted"] += 1
        elif status == 599 and record.within("web", at, took):
            counts["no answer while the web server restarted"] += 1
        elif record.within("database", at, took):
            counts["server error while the database restarted"] += 1
        else:
            counts["server error"] += 1
    return counts


# ---- clients --------------------------------------------------------------------------


class Client(threading.Thread):
    """One user: signs in for a token, then does one thing after another, picked at
    random by weight, until `until`."""

    def __init__(
        self, index: int, port: int, until: float, record: Record, items: int, seed: int
    ) -> None:
        super().__init__(daemon=True)
        self.index, self.port, self.until, self.record, self.items = (
            index,
            port,
            until,
            record,
            items,
        )
        self.random = random.Random(seed * 1000 + index)
        self.token = ""
        self.suites: list[str] = []
        self.pair_sets: list[str] = []
        self.tasks: list[str] = []
        self.runs: list[tuple[str, int]] = []
        # The last status seen of each of this client's runs.
        self.status: dict[tuple[str, int], str] = {}
        self.serial = 0

    def request(
        self,
        kind: str,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Token {self.token}"} if self.token else {}
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        start, at = time.perf_counter(), time.monotonic()
        payload: Any = None
        try:
            conn = http.client.HTTPConnection(HOST, self.port, timeout=120)
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            status = response.status
            conn.close()
            if "json" in (response.getheader("Content-Type") or ""):
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = None
        except OSError:
            status = 599  # no answer at all
        self.record.add(kind, status, time.perf_counter() - start, at)
        if status == 599:
            time.sleep(0.5)  # as a person would, before trying again
        self.record.actions[kind] += 1
        return status, payload

    def sign_in(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            body = {"username": f"soak{self.index}", "password": PASSWORD}
            status, answer = self.request("api: sign in", "POST", "/api/token/", body)
            if status == 200 and answer:
                self.token = answer["token"]
                return
            time.sleep(1)
        self.record.problem(f"client {self.index} could not sign in")

    def name(self, noun: str) -> str:
        self.serial += 1
        return f"soak {noun} {self.index}-{self.serial}-{uuid.uuid4().hex[:4]}"

    def expect_refused(self, kind: str, status: int, answer: Any) -> None:
        """A broken upload: 400 with a message, never anything else."""
        errors = (answer or {}).get("errors") if isinstance(answer, dict) else None
        if status >= 500 or status == 599:
            return  # counted with the server errors
        if status != 400 or not errors or not errors[0].get("message"):
            self.record.problem(f"{kind} answered {status} {str(answer)[:200]}")

    def remember_runs(self, kind: str, answer: Any) -> None:
        rows = answer if isinstance(answer, list) else (answer or {}).get("results", [])
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and "id" in row:
                if (kind, row["id"]) not in self.status:
                    self.runs.append((kind, row["id"]))
                self.status[kind, row["id"]] = row.get("status", "queued")
                with self.record.lock:
                    self.record.runs.append((kind, row["id"]))

    def open_runs(self) -> list[tuple[str, int]]:
        return [key for key, status in self.status.items() if status in ("queued", "running")]

    def waiting(self) -> bool:
        """Whether this user waits for results before asking for more (as a person
        would): the load then stays within what the workers score, and the queues can
        be quiet at the end."""
        if len(self.open_runs()) < MAX_OPEN_RUNS:
            return False
        self.poll()
        time.sleep(0.5)
        return True

    def run(self) -> None:
        self.sign_in()
        if not self.token:
            return
        actions: list[tuple[float, Callable[[], None]]] = [
            (14, self.read_page),
            (10, self.poll),
            (4, self.read_export),
            (8, self.upload_suite),
            (3, self.upload_broken_suite),
            (3, self.upload_pairs),
            (2, self.upload_broken_pairs),
            (2, self.upload_probing),
            (2, self.upload_broken_probing),
            (8, self.ask_suite_runs),
            (3, self.ask_pair_runs),
            (1, self.ask_probing_run),
            (3, self.cancel),
            (3, self.retry),
            (3, self.replace),
        ]
        weights = [w for w, _a in actions]
        while time.monotonic() < self.until:
            self.random.choices([a for _w, a in actions], weights)[0]()

    # -- reads

    def read_page(self) -> None:
        r = self.random
        pages = ["/", "/leaderboard/", "/runs/", "/minimal-pairs/", "/probing/"]
        if self.suites:
            pages.append(f"/suites/{quote(r.choice(self.suites))}/")
        if self.runs:
            kind, pk = r.choice(self.runs)
            pages.append(
                {
                    "suite": f"/evaluations/{pk}/",
                    "pairs": f"/pairs/evaluations/{pk}/",
                    "probing": f"/probing-runs/{pk}/",
                }[kind]
            )
        self.request("page", "GET", r.choice(pages))

    def poll(self) -> None:
        if not self.runs:
            self.request("api: runs", "GET", "/api/runs/?mine=1")
            return
        waiting = self.open_runs()
        kind, pk = self.random.choice(waiting if waiting else self.runs)
        path = {
            "suite": f"/api/evaluations/{pk}/",
            "pairs": f"/api/pairs/evaluations/{pk}/",
            "probing": f"/api/probing-runs/{pk}/",
        }[kind]
        status, answer = self.request("api: progress", "GET", path)
        if status == 200 and isinstance(answer, dict) and "status" in answer:
            self.status[kind, pk] = answer["status"]

    def read_export(self) -> None:
        r = self.random
        suite_runs = [pk for kind, pk in self.runs if kind == "suite"]
        paths = ["/leaderboard.csv", "/api/leaderboard/"]
        if suite_runs:
            pk = r.choice(suite_runs)
            paths += [f"/evaluations/{pk}/results.csv", f"/evaluations/{pk}/results.json"]
        if self.suites:
            paths.append(f"/api/suites/{quote(r.choice(self.suites))}/export/")
        self.request("export", "GET", r.choice(paths))

    # -- uploads

    def upload_suite(self) -> None:
        name = self.name("suite")
        status, _ = self.request(
            "api: upload suite", "POST", "/api/suites/", suite_document(name, self.items)
        )
        if status == 201:
            self.suites.append(name)

    def upload_broken_suite(self) -> None:
        kind = "api: upload broken suite"
        status, answer = self.request(kind, "POST", "/api/suites/", broken_suite(self.name("x")))
        self.expect_refused(kind, status, answer)

    def upload_pairs(self) -> None:
        name = self.name("pairs")
        path = f"/api/minimal-pairs/?name={quote(name)}&file_format=nlpscholar"
        body = pair_tsv(max(4, self.items // 2))
        status, _ = self.request(
            "api: upload pairs", "POST", path, body, "text/tab-separated-values"
        )
        if status == 201:
            self.pair_sets.append(name)

    def upload_broken_pairs(self) -> None:
        kind = "api: upload broken pairs"
        path = f"/api/minimal-pairs/?name={quote(self.name('x'))}"
        status, answer = self.request(
            kind, "POST", path, broken_pair_tsv(), "text/tab-separated-values"
        )
        self.expect_refused(kind, status, answer)

    def upload_probing(self) -> None:
        name = self.name("task")
        path = f"/api/probing-tasks/?name={quote(name)}&task_type=custom"
        status, _ = self.request(
            "api: upload probing", "POST", path, probing_text(12), "text/plain"
        )
        if status == 201:
            self.tasks.append(name)

    def upload_broken_probing(self) -> None:
        kind = "api: upload broken probing"
        path = f"/api/probing-tasks/?name={quote(self.name('x'))}"
        status, answer = self.request(kind, "POST", path, broken_probing_text(), "text/plain")
        self.expect_refused(kind, status, answer)

    # -- runs

    def ask_suite_runs(self) -> None:
        if self.waiting():
            return
        if not self.suites:
            return self.upload_suite()
        suites = self.random.sample(self.suites, min(2, len(self.suites)))
        body = {"models": [BASELINE, TRIGRAM], "suites": suites}
        status, answer = self.request("api: ask runs", "POST", "/api/evaluations/", body)
        if status in (200, 201):
            self.remember_runs("suite", answer)

    def ask_pair_runs(self) -> None:
        if self.waiting():
            return
        if not self.pair_sets:
            return self.upload_pairs()
        body = {"models": [BASELINE, TRIGRAM], "sets": [self.random.choice(self.pair_sets)]}
        status, answer = self.request("api: ask pair runs", "POST", "/api/pairs/evaluations/", body)
        if status in (200, 201):
            self.remember_runs("pairs", answer)

    def ask_probing_run(self) -> None:
        if self.waiting():
            return
        if not self.tasks:
            return self.upload_probing()
        body = {"task": self.random.choice(self.tasks), "models": [BASELINE]}
        status, answer = self.request("api: ask probing run", "POST", "/api/probing-runs/", body)
        if status in (200, 201):
            self.remember_runs("probing", answer)

    def _run_path(self, kind: str, pk: int, verb: str) -> str:
        return {
            "suite": f"/api/evaluations/{pk}/{verb}/",
            "pairs": f"/api/pairs/evaluations/{pk}/{verb}/",
            "probing": f"/api/probing-runs/{pk}/{verb}/",
        }[kind]

    def cancel(self) -> None:
        if self.runs:
            kind, pk = self.random.choice(self.runs[-8:])
            status, _ = self.request("api: cancel", "POST", self._run_path(kind, pk, "cancel"))
            if status in (200, 202):
                self.status[kind, pk] = "cancelled"

    def retry(self) -> None:
        if self.runs:
            if self.waiting():
                return
            kind, pk = self.random.choice(self.runs)
            status, _ = self.request("api: retry", "POST", self._run_path(kind, pk, "retry"))
            if status in (200, 201, 202):
                self.status[kind, pk] = "queued"

    def replace(self) -> None:
        """A suite's content replaced, most often one whose runs were just asked for."""
        if not self.suites:
            return
        name = self.random.choice(self.suites[-3:])
        verb = self.random.choice(["is", "was"])
        document = suite_document(name, self.items + self.random.randint(-2, 2), verb)
        self.request("api: replace suite", "PUT", f"/api/suites/{quote(name)}/", document)


# ---- faults ---------------------------------------------------------------------------


class Faults:
    """Each fault: do it, then wait (bounded) until the site has what it lost again."""

    def __init__(
        self,
        site: Site,
        record: Record,
        shape: str,
        redis: Redis | None,
        database: Postgres | None,
        disk: ResultsDisk,
        score_workers: int,
        hold: float,
    ) -> None:
        self.site, self.record, self.shape = site, record, shape
        self.redis, self.database, self.disk = redis, database, disk
        self.score_workers, self.hold = score_workers, hold
        self.injected: list[tuple[str, str, bool | None]] = []
        self.random = random.Random(len(shape))

    def busy_runs(self) -> int:
        """Runs running now (the staff watcher's view), or -1 when the site did not say."""
        try:
            conn = http.client.HTTPConnection(HOST, self.site.port, timeout=10)
            conn.request("GET", "/api/runs/?status=running")
            answer = json.loads(conn.getresponse().read())
            conn.close()
            return int(answer.get("count", 0))
        except (OSError, ValueError):
            return -1

    def wait_busy(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = self.busy_runs()
            if busy > 0:
                return busy
            time.sleep(0.5)
        return 0

    def back(self, check: Callable[[], bool], timeout: float = 120) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.site.process.poll() is not None:
                return False
            if check():
                return True
            time.sleep(0.5)
        return False

    def worker_back(self, marker: str, old: set[int]) -> bool:
        def check() -> bool:
            found = self.site.processes(marker)
            return any(pid not in old for pid in found) and bool(self.site.leader(marker))

        return self.back(check)

    def inject(self, name: str) -> None:
        fault = getattr(self, name.replace("-", "_"))
        started = time.monotonic()
        try:
            what, survived = fault()
        except Exception as exc:  # noqa: BLE001 - a fault that could not be done is reported
            what, survived = f"could not be done: {exc.__class__.__name__}: {exc}", False
        took = time.monotonic() - started
        mark = "skipped" if survived is None else ("survived" if survived else "NOT SURVIVED")
        say(f"fault {name}: {what} ({mark}, {took:.0f} s)")
        self.injected.append((name, what, survived))
        if survived is False:
            self.record.problem(f"fault {name}: {what}")

    def _scorer(self) -> str:
        k = self.random.randint(1, self.score_workers)
        return "gym-score@" if k == 1 else f"gym-score{k}@"

    def score_pool(self) -> tuple[str, bool | None]:
        busy = self.wait_busy()
        marker = self._scorer()
        pool = self.site.pool(marker)
        if pool is None:
            return f"no pool process of {marker} found", False
        old = set(self.site.processes(marker))
        os.kill(pool, signal.SIGKILL)
        return (
            f"SIGKILL to {marker}'s pool process {pool} ({busy} runs running)",
            self.worker_back(marker, old),
        )

    def score_worker(self) -> tuple[str, bool | None]:
        busy = self.wait_busy()
        marker = self._scorer()
        main = self.site.leader(marker)
        if main is None:
            return f"no {marker} worker found", False
        old = set(self.site.processes(marker))
        os.killpg(main, signal.SIGKILL)
        return (
            f"SIGKILL to the whole {marker} worker, group {main} ({busy} runs running)",
            self.worker_back(marker, old),
        )

    def store_worker(self) -> tuple[str, bool | None]:
        busy = self.wait_busy()
        main = self.site.leader("gym-store@")
        if main is None:
            return "no storing worker found", False
        old = set(self.site.processes("gym-store@"))
        os.killpg(main, signal.SIGKILL)
        return (
            f"SIGKILL to the storing worker, group {main} ({busy} runs in flight)",
            self.worker_back("gym-store@", old),
        )

    def redis_restart(self) -> tuple[str, bool | None]:
        window = Window("broker", time.monotonic())
        self.record.windows.append(window)
        if self.redis is not None:
            self.redis.kill()
            time.sleep(self.hold / 3)
            self.redis.start()
            window.end = time.monotonic()
            return (
                f"kill -9 redis-server on port {self.redis.port}, started again on the same "
                f"port and append-only file after {self.hold / 3:.0f} s",
                True,
            )
        found = self.site.processes("redis-server")
        if not found:
            return "no redis-server found", False
        (pid,) = list(found)[:1]
        os.kill(pid, signal.SIGKILL)
        survived = self.back(lambda: bool(set(self.site.processes("redis-server")) - {pid}))
        time.sleep(1)
        window.end = time.monotonic()
        return f"kill -9 the private redis-server {pid}; the supervisor started it again", survived

    def database_restart(self) -> tuple[str, bool | None]:
        if self.database is None:
            return "skipped: SQLite has no server", None
        window = Window("database", time.monotonic())
        self.record.windows.append(window)
        ended = self.database.terminate()
        time.sleep(1)
        ended += self.database.terminate()
        window.end = time.monotonic()
        return (
            "pg_terminate_backend on every connection to the soak's database "
            f"{self.database.name} ({ended} ended; the server itself untouched)",
            self.back(self.site.answers),
        )

    def disk_full(self) -> tuple[str, bool | None]:
        if not self.disk.mounted:
            return f"skipped: cannot mount a tmpfs on the results folder ({self.disk.why})", None
        busy = self.wait_busy()
        written = self.disk.fill()
        time.sleep(self.hold)
        self.disk.free()
        return (
            f"results folder's {self.disk.size_mb} MB tmpfs filled ({written >> 20} MB "
            f"written) for {self.hold:.0f} s with {busy} runs running",
            self.back(self.site.answers),
        )

    def web_term(self) -> tuple[str, bool | None]:
        main = self.site.leader("gunicorn")
        if main is None:
            return "no gunicorn master found", False
        window = Window("web", time.monotonic())
        self.record.windows.append(window)
        os.kill(main, signal.SIGTERM)

        def check() -> bool:
            leader = self.site.leader("gunicorn")
            return leader is not None and leader != main and self.site.answers()

        survived = self.back(check)
        window.end = time.monotonic()
        return f"SIGTERM to gunicorn's master {main}", survived


FAULTS = [
    "score-pool",
    "redis-restart",
    "store-worker",
    "database-restart",
    "web-term",
    "disk-full",
    "score-worker",
]
SMOKE_FAULTS = ["score-pool", "redis-restart", "database-restart", "web-term"]


# ---- the checks at the end ------------------------------------------------------------

_CHECK = r"""
import json
from collections import Counter
from django.db.models import Count
from evaluations.models import (
    Evaluation, EvaluationSnapshot, ItemResult, PairEvaluation, PairSentenceTokens, ProbingRun, ProbingLayerResult,
    Run,
)
answer = {"statuses": {}, "no_reason": 0, "duplicates": {}, "item_mismatch": [], "samples": []}
reasons = Counter()
for kind, model in (("suite", Evaluation), ("pairs", PairEvaluation), ("probing", ProbingRun)):
    answer["statuses"][kind] = dict(Counter(model.objects.values_list("status", flat=True)))
    answer["no_reason"] += model.objects.filter(status="failed", error="").count()
    for error in model.objects.filter(status="failed").values_list("error", flat=True):
        reasons[error.splitlines()[0][:100] if error else ""] += 1
answer["reasons"] = reasons.most_common(5)
for name, model, keys in (
    ("item rows", ItemResult, ("evaluation", "item_number")),
    ("pair token rows", PairSentenceTokens, ("evaluation", "sentid")),
    ("probing layer rows", ProbingLayerResult, ("run", "layer")),
):
    answer["duplicates"][name] = (
        model.objects.values(*keys).annotate(n=Count("id")).filter(n__gt=1).count()
    )
done = Evaluation.objects.filter(status="done").annotate(stored=Count("item_results"))
answer["done_suite_runs"] = done.count()
stored = dict(done.values_list("id", "stored"))
for pk, items in EvaluationSnapshot.objects.filter(pk__in=stored).values_list("pk", "content__items"):
    if stored[pk] != len(items or []):
        answer["item_mismatch"].append([pk, stored[pk], len(items or [])])
# The latest done runs on the clients' suites, each model in turn.
mine = done.filter(suite__owner__isnull=False).select_related("model").order_by("-pk")
picked = []
for name in sorted(set(mine.values_list("model__name", flat=True))):
    picked.append(list(mine.filter(model__name=name)[:SAMPLES]))
picked = [run for group in zip(*picked) for run in group][:SAMPLES] if picked else []
for run in picked:
    answer["samples"].append({
        "id": run.pk, "model": run.model.name, "source": run.model.source,
        "snapshot": run.snapshot, "metric": run.metric,
        "values": {str(r.item_number): r.values for r in run.item_results.all()},
    })
print("CHECK " + json.dumps(answer))
"""


def stored_state(env: dict[str, str], samples: int) -> dict[str, Any]:
    out = manage(env, "shell", "-c", _CHECK.replace("SAMPLES", str(samples)))
    line = next(line for line in out.splitlines() if line.startswith("CHECK "))
    return json.loads(line.removeprefix("CHECK "))


def open_runs(env: dict[str, str]) -> list[str]:
    """One line per run that is neither done, failed nor cancelled: its kind, id, status,
    attempt and progress, so that a run that moves can be told from one that does not."""
    code = (
        "from evaluations.models import Evaluation, PairEvaluation, ProbingRun, Run\n"
        "for m in (Evaluation, PairEvaluation, ProbingRun):\n"
        "    for r in m.objects.exclude(status__in=Run.FINISHED).order_by('pk'):\n"
        "        print('OPEN', m.__name__, r.pk, r.status, 'attempt', r.attempt,"
        " 'progress', f'{r.progress_done}/{r.progress_total}')\n"
    )
    out = manage(env, "shell", "-c", code, timeout=120)
    return [line[5:] for line in out.splitlines() if line.startswith("OPEN ")]


def compare_fresh(env: dict[str, str], sample: dict[str, Any], folder: Path) -> float | None:
    """The largest difference (bits) between a done run's stored region values and
    `manage.py score` on the same content, computed fresh; None when they disagree on
    which values exist."""
    suite_file = folder / f"suite-{sample['id']}.json"
    suite_file.write_text(json.dumps(sample["snapshot"]))
    out_file = folder / f"fresh-{sample['id']}.json"
    manage(
        env,
        "score",
        "--model",
        sample["source"],
        "--suite",
        str(suite_file),
        "--out",
        str(out_file),
    )
    fresh = json.loads(out_file.read_text())
    worst = 0.0
    for item in fresh["items"]:
        stored = sample["values"].get(str(item["item_number"]))
        if stored is None:
            return None
        for condition in item["conditions"]:
            values = stored[condition["condition_name"]][sample["metric"]]
            for i, region in enumerate(condition["regions"]):
                a, b = values[i], region["metric_value"][sample["metric"]]
                if (a is None) != (b is None):
                    return None
                if a is not None:
                    worst = max(worst, abs(a - b))
    return worst


def web_errors(log: str) -> list[str]:
    """The tracebacks of requests that failed, as Django logs them (first 40 lines)."""
    found = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("Internal Server Error", "Service Unavailable")):
            block = [line]
            for following in lines[i + 1 : i + 60]:
                if following.startswith("[20") and len(block) > 2:
                    break
                block.append(following)
            found.append("\n".join(block[:40]))
    return found


def compare_into(
    compared: list[tuple[int, str, float | None]],
    env: dict[str, str],
    sample: dict[str, Any],
    folder: Path,
    record: Record,
) -> None:
    try:
        compared.append((sample["id"], sample["model"], compare_fresh(env, sample, folder)))
    except (RuntimeError, OSError, ValueError, KeyError) as exc:
        record.problem(f"run {sample['id']}: no fresh score to compare with: {exc}")


# ---- main -----------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=["production", "embedded"], default="production")
    parser.add_argument("--minutes", type=float, default=10.0, help="load time (default 10)")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--items", type=int, default=24, help="items per uploaded suite")
    parser.add_argument("--quiet-minutes", type=float, default=5.0, help="wait for the queues")
    parser.add_argument("--samples", type=int, default=3, help="runs compared with a fresh score")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--postgres",
        default="",
        help="a PostgreSQL URL to create the throw-away database from (default "
        "DATABASE_URL if it is PostgreSQL, else postgres://postgres@127.0.0.1:5432/postgres)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI: 60 s of load, 3 clients, 4 faults, 2 compared runs, --fail-on-problems",
    )
    parser.add_argument("--fail-on-problems", action="store_true", help="exit 1 when a check fails")
    args = parser.parse_args(argv)
    if args.smoke:
        args.minutes, args.clients, args.items, args.samples = 1.0, 3, 12, 2
        args.quiet_minutes = min(args.quiet_minutes, 2.0)
        args.fail_on_problems = True
    if not args.postgres:
        from_env = os.environ.get("DATABASE_URL", "")
        args.postgres = (
            from_env
            if from_env.startswith("postgres")
            else "postgres://postgres@127.0.0.1:5432/postgres"
        )
    return args


def summary(
    record: Record,
    elapsed: float,
    state: dict[str, Any],
    compared: list[tuple[int, str, float | None]],
    faults: list[tuple[str, str, bool | None]],
    stuck: int,
) -> tuple[list[str], list[str]]:
    """The printed figures, and the problems found (empty: every check passed)."""
    lines, problems = [], list(record.problems)
    samples = record.samples
    counts = classify(record)
    lines.append(f"requests      {len(samples)} ({len(samples) / max(elapsed, 1):.1f}/s)")
    lines.append("answers       " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    statuses = Counter(status for _k, status, _t, _a in samples)
    lines.append("statuses      " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    lines += latency_lines(
        [(kind, status, took) for kind, status, took, _at in samples],
        kind_width=28,
        errors="5xx/none",
    )
    if counts["server error"]:
        problems.append(f"{counts['server error']} server errors outside the faults' windows")
    if counts["server error while the database restarted"]:
        problems.append(
            f"{counts['server error while the database restarted']} server errors while the "
            "database restarted (only 503 is allowed there)"
        )
    for kind, by_status in state["statuses"].items():
        total = sum(by_status.values())
        shown = ", ".join(f"{s} {n}" for s, n in sorted(by_status.items()))
        lines.append(f"runs {kind:9} {total:5} ({shown or 'none'})")
    lines.append(f"stuck         {stuck}   (target 0: every run done, failed or cancelled)")
    if stuck:
        problems.append(f"{stuck} runs neither done, failed nor cancelled")
    lines.append(f"failed, no reason  {state['no_reason']}   (target 0)")
    for reason, n in state.get("reasons", []):
        lines.append(f"  failed {n:4}: {reason or '(no reason)'}")
    if state["no_reason"]:
        problems.append(f"{state['no_reason']} failed runs without a reason")
    dupes = ", ".join(f"{k} {n}" for k, n in state["duplicates"].items())
    lines.append(f"duplicates    {dupes}   (target 0)")
    if any(state["duplicates"].values()):
        problems.append(f"duplicate rows: {dupes}")
    mismatched = state["item_mismatch"]
    lines.append(
        f"done suite runs with one item row per item  "
        f"{state['done_suite_runs'] - len(mismatched)} of {state['done_suite_runs']}"
    )
    if mismatched:
        problems.append(f"done runs whose item rows differ from their items: {mismatched[:5]}")
    for pk, model, worst in compared:
        shown = (
            "values missing or extra" if worst is None else f"largest difference {worst:.2e} bits"
        )
        lines.append(f"fresh score   run {pk} ({model}): {shown}")
        if worst is None or worst > 1e-3:
            problems.append(f"run {pk} ({model}) differs from a fresh score: {shown}")
    if not compared:
        problems.append("no done run to compare with a fresh score")
    done = sum(1 for _n, _w, s in faults if s)
    skipped = sum(1 for _n, _w, s in faults if s is None)
    lines.append(
        f"faults        {len(faults) - skipped} injected, {done} survived, {skipped} skipped"
    )
    if record.actions:
        lines.append(
            "did           "
            + ", ".join(f"{k.removeprefix('api: ')} {n}" for k, n in sorted(record.actions.items()))
        )
    return lines, problems


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = Path(tempfile.mkdtemp(prefix="gym-soak-"))
    var_dir = folder / "var"
    results_dir = var_dir / "results"
    port = free_port()
    redis: Redis | None = None
    database: Postgres | None = None
    disk = ResultsDisk(results_dir, 48)
    site: Site | None = None
    interrupted = False

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # Even where the shell that started it ignores Ctrl-C (a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY", "GYM_CACHE_URL"}
        | {"DJANGO_SETTINGS_MODULE", "GYM_SCORE_WORKERS", "GYM_RUN_RESULTS_DIR"}
    }
    env |= {
        "GYM_VAR_DIR": str(var_dir),
        "PORT": str(port),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "GYM_THROTTLE_ANON": "100000/minute",
        "GYM_THROTTLE_USER": "100000/minute",
        "GYM_THROTTLE_ANON_VALIDATE": "100000/minute",
        # Faults come every minute or so: the sweep and the supervisor look more often
        # than their defaults, as the fault tests do.
        "GYM_SWEEP_EVERY_SECONDS": "5",
        "GYM_SWEEP_ORPHAN_AFTER": "20",
        "GYM_LIVENESS_EVERY_SECONDS": "5",
        "GYM_WEDGED_AFTER": "60",
        "GYM_STOP_GRACE": "5",
        "GYM_MAX_DELIVERIES": "5",
    }
    record = Record()
    clients: list[Client] = []
    faults: Faults | None = None
    started = elapsed = 0.0
    state: dict[str, Any] = {}
    compared: list[tuple[int, str, float | None]] = []
    stuck = -1
    try:
        disk.mount()
        if not disk.mounted:
            say(f"skipped: cannot mount a tmpfs on {results_dir} ({disk.why})")
        if args.shape == "production":
            database = Postgres(args.postgres)
            database.create()
            redis = Redis(folder / "redis")
            redis.start()
            env |= {
                "DATABASE_URL": database.url,
                "CELERY_BROKER_URL": redis.url,
                "GYM_SCORE_WORKERS": "2",
                "GYM_RUN_RESULTS_DIR": str(results_dir),
            }
            say(
                f"production shape: PostgreSQL database {database.name} (created here), "
                f"redis-server on {HOST}:{redis.port} (append-only), two scoring workers"
            )
        else:
            say("embedded shape: SQLite and the private Redis, as bash scripts/run.sh starts it")
        setup = time.monotonic()
        site = Site(folder, env, port)
        site.wait_ready(600)
        manage(env, "shell", "-c", _USERS.format(clients=args.clients, password=PASSWORD))
        say(f"site up on http://{HOST}:{port}/ in {time.monotonic() - setup:.0f} s")

        until = time.monotonic() + args.minutes * 60
        clients = [
            Client(i, port, until, record, args.items, args.seed) for i in range(args.clients)
        ]
        started = time.monotonic()
        for client in clients:
            client.start()
        faults = Faults(
            site,
            record,
            args.shape,
            redis,
            database,
            disk,
            2 if args.shape == "production" else 1,
            hold=6 if args.smoke else 15,
        )
        schedule = SMOKE_FAULTS if args.smoke else FAULTS
        # Faults at even intervals, the whole list over again while time is left.
        period = args.minutes * 60 / (len(schedule) + 1)
        period = max(period, 10.0) if args.smoke else max(period, 40.0)
        next_at, n = started + period, 0
        while time.monotonic() < until - 5:
            if time.monotonic() >= next_at:
                faults.inject(schedule[n % len(schedule)])
                n += 1
                next_at = max(time.monotonic() + 5, started + (n + 1) * period)
                if args.smoke and n >= len(schedule):
                    next_at = until
            time.sleep(0.5)
        for client in clients:
            client.join()
        elapsed = time.monotonic() - started
        say(f"load over after {elapsed:.0f} s; waiting for the queues to be quiet")
        # Wait while the open runs move (a status or a progress count changes); a run that
        # has not moved for --quiet-minutes is stuck. At most three times that in all.
        waited_from = time.monotonic()
        moved_at, seen = waited_from, None
        while True:
            still = open_runs(env)
            if still != seen:
                moved_at, seen = time.monotonic(), still
            now = time.monotonic()
            if (
                not still
                or now - moved_at >= args.quiet_minutes * 60
                or now - waited_from >= 3 * args.quiet_minutes * 60
            ):
                break
            time.sleep(10)
        stuck = len(still)
        say(
            f"{stuck} runs still open after {time.monotonic() - waited_from:.0f} s "
            f"(the last change {time.monotonic() - moved_at:.0f} s ago); checking what is stored"
        )
        for line in still:
            say(f"  open: {line}")
        state = stored_state(env, args.samples)
        # The fresh scores side by side: each is a process of its own that loads a model.
        threads = [
            threading.Thread(target=compare_into, args=(compared, env, sample, folder, record))
            for sample in state["samples"]
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        interrupted = True
        say("interrupted: cleaning up")
    finally:
        # A second Ctrl-C must not cut the cleaning short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for client in clients:
            client.until = 0
        if site is not None:
            site.stop()
            tail = site.text()
        else:
            tail = ""
        disk.free()
        disk.unmount()
        if redis is not None:
            redis.kill()
        if database is not None:
            try:
                database.drop()
            except Exception as exc:  # noqa: BLE001 - say so, and go on cleaning
                say(f"could not drop {database.name}: {exc}")
        shutil.rmtree(folder, ignore_errors=True)
    if interrupted or not state:
        return 130 if interrupted else 1
    lines, problems = summary(
        record, elapsed, state, compared, faults.injected if faults else [], stuck
    )
    print(
        f"soak: {args.shape} shape, {args.clients} clients for {elapsed:.0f} s "
        f"against http://{HOST}:{port}/"
    )
    for line in lines:
        print(line)
    if problems:
        print(f"problems      {len(problems)}")
        for problem in problems:
            print(f"  - {problem}")
        for error in web_errors(tail)[-3:]:
            print("a server error in the site's log:\n" + error)
    else:
        print("problems      0")
    return 1 if args.fail_on_problems and problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
