"""The README's run command (`bash scripts/run.sh`) on its embedded defaults, in a
throw-away var folder: a worker that dies is started again, the site keeps serving, and
the periodic sweep of runs runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.celery_harness import until
from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            return response.status
    except OSError:
        return None


def _processes(session: int, marker: str) -> list[int]:
    """Processes of the run command's session whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != session:
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ProcessLookupError):
            continue
        if marker in command and "celery" in command:
            found.append(int(entry.name))
    return found


def test_a_crashed_worker_is_restarted_and_the_site_keeps_serving(tmp_path) -> None:
    port = _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env |= {
        "GYM_VAR_DIR": str(tmp_path / "var"),
        "PORT": str(port),
        "HF_HUB_OFFLINE": "1",
        "GYM_SWEEP_EVERY_SECONDS": "2",
    }
    log = tmp_path / "run.log"
    command = subprocess.Popen(
        ["bash", "scripts/run.sh"],
        cwd=REPO,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    home = f"http://127.0.0.1:{port}/"
    try:
        until("the site", lambda: command.poll() is None and _status(home) == 200, timeout=600)
        # The scoring worker: its main process and its pool process, killed as a crash
        # (or the out-of-memory killer) would.
        before = until(
            "the scoring worker", lambda: set(_processes(command.pid, "gym-score@")), timeout=600
        )
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        assert _status(home) == 200
        until(
            "a new scoring worker",
            lambda: set(_processes(command.pid, "gym-score@")) - before,
            timeout=120,
        )
        assert "run: score exited" in log.read_text()
        # The periodic sweep runs in this setup too, without anybody asking.
        until("a sweep", lambda: "Task runs.sweep" in log.read_text(), timeout=120)
        assert _status(home) == 200
        assert command.poll() is None
    finally:
        os.killpg(command.pid, signal.SIGTERM)
        try:
            command.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:  # whatever is left of the session
            os.killpg(command.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        command.wait(timeout=30)
