"""benchmarks/soak.py is a script, not a test; this checks only its parts that need no
site: the arguments and the verdict it prints."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", REPO / "benchmarks" / "soak.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _state(**changes: object) -> dict[str, object]:
    state: dict[str, object] = {
        "statuses": {"suite": {"done": 3, "cancelled": 1}, "pairs": {}, "probing": {}},
        "no_reason": 0,
        "duplicates": {"item rows": 0},
        "item_mismatch": [],
        "done_suite_runs": 3,
    }
    return state | changes


def test_arguments() -> None:
    soak = _soak()
    args = soak.parse(["--shape", "embedded", "--postgres", "postgres://x@h/db"])
    assert (args.shape, args.minutes, args.fail_on_problems) == ("embedded", 10.0, False)
    smoke = soak.parse(["--smoke"])
    assert smoke.shape == "production" and smoke.fail_on_problems
    assert smoke.minutes < 2 and smoke.clients < args.clients


def test_summary_passes_only_a_clean_soak() -> None:
    soak = _soak()
    record = soak.Record()
    record.windows.append(soak.Window("broker", 100.0, 110.0))
    record.add("page", 200, 0.1, 50.0)
    record.add("api: ask runs", 503, 0.2, 105.0)  # while the broker was down
    compared = [(1, "random-baseline", 0.0)]
    faults = [("redis-restart", "kill -9", True), ("disk-full", "skipped: cannot mount", None)]
    lines, problems = soak.summary(record, 60.0, _state(), compared, faults, stuck=0)
    assert problems == []
    assert any(line.startswith("faults        1 injected, 1 survived, 1 skipped") for line in lines)

    record.add("page", 500, 0.1, 300.0)  # outside every fault's window
    _lines, problems = soak.summary(
        record, 60.0, _state(no_reason=2), [(1, "m", 0.5)], faults, stuck=1
    )
    assert len(problems) == 4, problems
