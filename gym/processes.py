"""Whether a process is alive, for the code that removes what a dead process left."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process `pid` exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
