"""The tests' fork server for Celery workers: one per test process, started by
tests/celery_harness.py the first time a test asks for a worker.

A gpu worker imports torch and transformers' model machinery before it starts its pool
(evaluations.runs.tasks.import_work_functions): started from nothing, one is ready after
about 8.5 s of CPU, forked from here after about 0.6 s, and a test session starts some
sixty. This process imports those libraries and the ones of every worker (Django,
Celery) once, nothing of the project's (the settings are read by each worker after its
environment is set), and forks every worker from itself. A forked worker is the real
thing from there on: `python -m celery` run in it with the asked-for arguments,
environment, working folder and log, the leader of its own session, with its own pool
processes, killed the way any process is.
tests/runs/test_worker_warm_up.py checks what a worker started from nothing imports, in
fresh interpreters.

Requests come on standard input, one JSON line each: {"argv": [...], "env": {...},
"log": path, "exit": path}; the answer on standard output is the worker's pid. When a
worker ends, its return code (as subprocess gives it: minus the signal that killed it)
is written to its "exit" file. End of input ends this process.

The first line it writes is "ready" and the JSON list of the environment variables its
imports read."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# Environment variables read below Python when these libraries load (OpenMP, MKL and
# CUDA threads and devices, torch's C++ side) or found by walking the whole environment
# (tqdm): a worker whose environment gives any of them another value than this process
# has is started fresh. What the libraries read through os.environ is recorded as they
# are imported instead (`_import_libraries`).
READ_AT_IMPORT = (
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "OPENBLAS_",
    "CUDA_",
    "TORCH",
    "PYTORCH_",
    "TQDM_",
)

# Libraries every worker imports before it takes a message, none of which reads Django's
# settings when imported: Django's request and ORM machinery, Celery's worker, its
# prefork pool and Redis transport, the PostgreSQL driver.
WORKER_LIBRARIES = (
    "django.db.models",
    "django.http",
    "django.core.handlers.base",
    "rest_framework.serializers",
    "celery.bin.celery",
    "celery.apps.worker",
    "celery.worker.consumer",
    "celery.concurrency.prefork",
    "celery.fixups.django",
    "billiard.pool",
    "kombu.transport.redis",
    "redis",
    "psycopg",
)


def _import_libraries() -> list[str]:
    """Import the libraries; the names of the environment variables they read through
    os.environ while doing so (a worker whose environment gives one of them another value
    is started fresh: tests/celery_harness.py)."""
    read: set[str] = set()
    environ = type(os.environ)
    get = environ.__getitem__

    def reading_get(self: Any, key: str) -> str:
        # os.environ[key], .get(key) and `key in os.environ` come here; walking the whole
        # environment (tqdm looks for its own variables so) or copying it reads no one
        # variable: READ_AT_IMPORT names what is found that way.
        if sys._getframe(1).f_code.co_name not in ("__iter__", "copy"):
            read.add(key)
        return get(self, key)

    environ.__getitem__ = reading_get  # type: ignore[method-assign]
    try:
        # What a gpu worker's warm-up imports, from the project's own file loaded by its
        # path, so that no module of the project's package is imported before a worker's
        # environment is set.
        import torch  # noqa: F401

        preload = runpy.run_path(str(REPO / "evaluations" / "scoring" / "preload.py"))
        preload["preload_transformers"]()
        for name in WORKER_LIBRARIES:
            importlib.import_module(name)
    finally:
        environ.__getitem__ = get  # type: ignore[method-assign]
    return sorted(read)


def _reap(exits: dict[int, str]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        path = exits.pop(pid, None)
        if path:
            Path(path + ".part").write_text(str(code))
            os.replace(path + ".part", path)


def _become_worker(request: dict[str, Any]) -> None:
    """In the forked child: the worker's session, folder, environment, output and
    arguments, then Celery's own entry point; never returns."""
    code = 1
    try:
        for number in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        os.setsid()
        os.chdir(REPO)
        os.environ.clear()
        os.environ.update(request["env"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        # What `python -m celery ARGV...` runs, in this process.
        sys.argv = ["celery", *request["argv"]]
        runpy.run_module("celery", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever it was goes to the worker's log
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    read = _import_libraries()
    exits: dict[int, str] = {}
    signal.signal(signal.SIGCHLD, lambda *_: _reap(exits))
    answers = sys.stdout
    print("ready", json.dumps(read), file=answers, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        # No SIGCHLD between the fork and the pid's exit file being known.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            _become_worker(request)
        exits[pid] = request["exit"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        print(pid, file=answers, flush=True)


if __name__ == "__main__":
    serve()
