"""The processes a site started as `bash scripts/run.sh` starts it (`python -m
gym.embedded`, the leader of its own session), found through /proc, for the fault test
and the soak benchmark that kill them one at a time. Standard library only: the
benchmark imports it outside Django."""

from __future__ import annotations

import os
from pathlib import Path


def session_processes(session: int, marker: str) -> dict[int, int]:
    """pid -> process group of the live processes of `session` (the site's leader's pid)
    whose command line holds `marker`; a zombie (ended, not yet reaped) is left out."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid = int(entry.name)
            if os.getsid(pid) != session:
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker in command and (entry / "stat").read_text().split()[2] != "Z":
                found[pid] = os.getpgid(pid)
        except (OSError, ProcessLookupError):
            continue
    return found
