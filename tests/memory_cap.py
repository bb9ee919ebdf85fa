"""Run one call in a child process and learn how much memory it took, under a hard cap.

`run_capped("module:function", args, cap_mb=...)` forks, and in the child runs the call
with its address space held to its size at the start plus a safety margin
(`resource.setrlimit(RLIMIT_AS, ...)`), so that a reader that would build gigabytes
fails there with a MemoryError instead of taking the machine (no swap) with it. The
answer says what the call returned or raised and its *peak*: the child's highest
resident memory (VmHWM, reset at the start) above its resident memory at the start. A
test asserts `peak_mb < cap_mb`; the address-space limit is only the safety net, set
wider than the cap, because imported libraries (numpy, torch, pyarrow) reserve address
space they never touch.

Fork, not spawn: the child has the test's imports, settings and fixtures without
paying for them again, and the baseline leaves them out. Django database connections
the child inherits are set aside unclosed (closing them would end the parent's
session) and the child opens its own; so a test whose child reads or writes the
database uses `django_db(transaction=True)`, the child seeing only committed rows.

Linux only (/proc/self/status and clear_refs); `available()` says whether it runs here.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import re
import resource
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MB = 1024 * 1024
# The address space the call may add beyond `cap_mb`: enough that the cap, not the
# limit, is what a test meets first (pyarrow's allocator, mimalloc, reserves address space
# a gigabyte at a time, and a C++ allocation refused there aborts the process), and little
# enough that a runaway call stops long before it takes the machine.
SAFETY_FACTOR = 2
SAFETY_MIN_EXTRA_MB = 4096
# Not a test of speed: only a hung child is stopped, so that a test cannot hang forever.
HUNG_AFTER_S = 900.0

_set_aside: list[object] = []


@dataclass(frozen=True)
class Capped:
    """What the call did in the child. `died` says why no answer came back ('' when one did)."""

    value: Any
    error: BaseException | None
    peak_mb: float
    cap_mb: int
    died: str = ""

    @property
    def out_of_memory(self) -> bool:
        return isinstance(self.error, MemoryError) or "memory" in self.died

    @property
    def within_cap(self) -> bool:
        return not self.died and not self.out_of_memory and self.peak_mb < self.cap_mb

    def result(self) -> Any:
        """The value, or the exception the call raised (raised again here)."""
        if self.died:
            raise RuntimeError(f"the child died: {self.died}")
        if self.error is not None:
            raise self.error
        return self.value

    def __str__(self) -> str:
        outcome = self.died or (repr(self.error) if self.error is not None else "returned")
        return f"peak {self.peak_mb:,.0f} MB (cap {self.cap_mb:,} MB): {outcome[:300]}"


def available() -> bool:
    return sys.platform.startswith("linux") and os.path.exists("/proc/self/clear_refs")


def run_capped(
    target: str | Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    cap_mb: int,
    limit_mb: int | None = None,
) -> Capped:
    """Call `target` ("package.module:function", or a callable) with `args` and `kwargs`
    in a forked child, its address space held to `limit_mb` more than at the start
    (default: the larger of twice the cap and the cap plus 4 GB)."""
    limit = (
        limit_mb
        if limit_mb is not None
        else max(SAFETY_FACTOR * cap_mb, cap_mb + SAFETY_MIN_EXTRA_MB)
    )
    function = _resolve(target)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(function, args, dict(kwargs or {}), limit, write_end)
    os.close(write_end)
    return _answer(pid, read_end, cap_mb)


def _resolve(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    function = importlib.import_module(module)
    for part in name.split("."):
        function = getattr(function, part)
    if not callable(function):
        raise TypeError(f"{target} is not callable")
    return function


def _status(field: str) -> int:
    """A /proc/self/status figure in bytes (VmRSS, VmHWM, VmSize)."""
    with open("/proc/self/status") as handle:
        found = re.search(rf"^{field}:\s+(\d+) kB", handle.read(), re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


def _set_aside_connections() -> None:
    """Keep the inherited database connections referenced and unused, so that neither
    a query nor a finaliser of the child's touches the parent's sessions."""
    django_db = sys.modules.get("django.db")
    if django_db is None:
        return
    for connection in django_db.connections.all(initialized_only=True):
        _set_aside.append(connection.connection)
        connection.connection = None
        connection.in_atomic_block = False
        connection.savepoint_ids = []
        connection.needs_rollback = False
        connection.atomic_blocks = []


def _child(
    function: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    limit_mb: int,
    out: int,
) -> None:
    code = 0
    try:
        _set_aside_connections()
        gc.collect()
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # VmHWM starts again from VmRSS
        start = _status("VmRSS")
        room = _status("VmSize") + limit_mb * MB
        resource.setrlimit(resource.RLIMIT_AS, (room, resource.RLIM_INFINITY))
        value: Any = None
        error: BaseException | None = None
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the parent judges it
            error = exc
            # The parent sees the exception, not the child's stack: it goes as a note.
            exc.add_note("in the child:\n" + "".join(traceback.format_tb(exc.__traceback__)))
        peak = max(0, _status("VmHWM") - start) / MB
        # Released before pickling: the answer must not fail for want of memory.
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        outcome = _picklable(value if error is None else error)
        answer = (outcome, None, peak) if error is None else (None, outcome, peak)
        _send(out, pickle.dumps(answer))
    except BaseException as exc:  # noqa: BLE001
        code = 3
        try:
            _send(out, pickle.dumps((None, RuntimeError(f"the child failed: {exc!r}"), 0.0)))
        except BaseException:  # noqa: BLE001
            code = 4
    finally:
        os._exit(code)


class ChildError(Exception):
    """An exception of the child's that could not cross to the parent as it was (one
    whose class does not rebuild from its pickle): its class's name and its text."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(f"{kind}: {text}")
        self.kind = kind
        self.text = text

    def __reduce__(self) -> tuple[type[ChildError], tuple[str, str]]:
        return (ChildError, (self.kind, self.text))


def _picklable(value: Any) -> Any:
    """`value`, if it comes back from a pickle as it was; else its description."""
    try:
        back = pickle.loads(pickle.dumps(value))
        if not isinstance(value, BaseException) or (
            type(back) is type(value) and str(back) == str(value)
        ):
            return value
    except Exception:  # noqa: BLE001 - anything that cannot cross becomes its description
        pass
    if isinstance(value, BaseException):
        return ChildError(type(value).__name__, str(value)[:10_000])
    return repr(value)[:10_000]


def _send(out: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(out, view) :]
    os.close(out)


def _answer(pid: int, read_end: int, cap_mb: int) -> Capped:
    chunks: list[bytes] = []
    deadline = time.monotonic() + HUNG_AFTER_S
    while True:
        ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    died = ""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        died = f"killed by signal {signal.Signals(number).name}"
        if number == signal.SIGKILL:
            died += " (out of memory, or hung)"
    if not chunks:
        return Capped(None, None, 0.0, cap_mb, died or f"no answer (exit status {status})")
    value, error, peak = pickle.loads(b"".join(chunks))
    return Capped(value, error, peak, cap_mb, died)
