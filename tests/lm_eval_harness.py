"""The real lm-evaluation-harness run as a user runs it on an exported task folder (the
tiny local model, CPU, offline): the tests of both exports (pair sets and suites) call it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_lm_eval(model: Path, include: Path, tasks: str, out: Path, key: str) -> dict[str, Any]:
    """`lm_eval --include_path include --tasks tasks` with its samples logged: for each
    task, {"acc": the harness's accuracy, "samples": its samples by the document's `key`}."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.update(TRANSFORMERS_OFFLINE="1", HF_DATASETS_CACHE=str(out / "cache"))
    env["OMP_NUM_THREADS"] = "1"
    command = [
        str(Path(sys.executable).parent / "lm_eval"),
        "--model", "hf",
        "--model_args", f"pretrained={model},dtype=float32",
        "--include_path", str(include),
        "--tasks", tasks,
        "--device", "cpu",
        "--batch_size", "1",
        "--output_path", str(out),
        "--log_samples",
    ]  # fmt: skip
    done = subprocess.run(
        command, env=env, cwd=include, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    found: dict[str, Any] = {}
    for task in tasks.split(","):
        (samples_file,) = out.rglob(f"samples_{task}_*.jsonl")
        samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
        found[task] = {
            "acc": results[task]["acc,none"],
            "samples": {s["doc"][key]: s for s in samples},
        }
    return found
