"""Warm start of `manage.py score`: how long a process takes to reach its first forward pass.

Runs `manage.py score --model M --suite S --timings` again and again (the first run only
fills the OS file cache and is not counted), and prints, per run and as medians: seconds
from the process's start to the start of scoring (`before_handle + read_suites +
load_model`), the CPU seconds the process had used by then (`cpu_at_scoring`: unlike the
wall clock, not stretched by other processes' load), each step, and the load average.

    .venv/bin/python benchmarks/warm_start.py --model /tmp/gym-bench/gpt2-small-random
    .venv/bin/python benchmarks/warm_start.py --model M --other /path/to/another/checkout

`--other` runs that checkout's `manage.py` in turn with this one's (same model, same
suite), so that both see the same load; it needs a `.venv` of its own (a link will do).
The GPT-2-small shape is built by `benchmarks/scoring.py` (in /tmp/gym-bench).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = "syntaxgym-2020/master/cleft.json"


def one_run(tree: Path, model: str, suite: str, out: Path) -> dict[str, Any]:
    # The command's own default database (SQLite): it needs none, and a PostgreSQL URL
    # would only add a driver import.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GYM_LEAN_STARTUP")}
    load = os.getloadavg()[0]
    done = subprocess.run(
        [str(tree / ".venv/bin/python"), "manage.py", "score", "--model", model, "--suite",
         suite, "--out", str(out), "--timings"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.startswith("timings ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{tree}: manage.py score failed:\n{done.stderr[-3000:]}")
    timings = json.loads(lines[0].removeprefix("timings "))
    return {
        "load1": round(load, 2),
        "to_scoring": round(
            timings["before_handle"] + timings["read_suites"] + timings["load_model"], 3
        ),
        "cpu_at_scoring": timings.get("cpu_at_scoring"),
        "before_handle": timings["before_handle"],
        "read_suites": timings["read_suites"],
        **timings["load_steps"],
    }


def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k in rows[0] if all(isinstance(r.get(k), int | float) for r in rows)]
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model", required=True, help="a model folder")
    parser.add_argument(
        "--suite",
        default=str(Path(os.environ.get("GYM_SHARED_DATA", "/work/shared/data")) / DEFAULT_SUITE),
    )
    parser.add_argument("--runs", type=int, default=6, help="counted runs (after one warm-up)")
    parser.add_argument("--other", type=Path, help="another checkout, run in turn with this one")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gym-warm-start"))
    args = parser.parse_args()
    trees = {"this": REPO, **({"other": args.other.resolve()} if args.other else {})}
    args.out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for run in range(args.runs + 1):
        for name, tree in trees.items():
            row = one_run(tree, args.model, args.suite, args.out / f"{name}.results.json")
            print(name, run, json.dumps(row), flush=True)
            if run:  # the first run fills the file cache
                rows[name].append(row)
    for name, counted in rows.items():
        print("median", name, json.dumps(medians(counted)))
    if args.other:
        same = (args.out / "this.results.json").read_bytes() == (
            args.out / "other.results.json"
        ).read_bytes()
        print("results files identical:", same)


if __name__ == "__main__":
    main()
