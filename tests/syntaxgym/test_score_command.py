"""`manage.py score` over several suites: one engine call, results written per suite.

Runs the real command on the project's example suites with a tiny local GPT-2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evaluations import scoring
from evaluations.scoring import worker
from suites import formats
from tests.conftest import EXAMPLES, manage

TOL = 1e-4  # bits: batches differ between one call and another, values only by float noise


def region_values(document: dict[str, Any]) -> list[float | None]:
    return [
        region["metric_value"][metric]
        for item in document["items"]
        for condition in item["conditions"]
        for region in condition["regions"]
        for metric in scoring.METRICS
    ]


def test_many_suites_are_scored_in_one_engine_call(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = sorted(EXAMPLES.glob("*.json"))
    assert len(files) >= 3
    calls: list[int] = []
    real = scoring.score_sentences

    def counted(model, sentences, **kwargs):
        calls.append(len(sentences))
        return real(model, sentences, **kwargs)

    monkeypatch.setattr(worker.scoring, "score_sentences", counted)
    out = tmp_path / "all"
    call_command("score", "--model", str(tiny_gpt2), "--suite", str(EXAMPLES), "--out", str(out))
    suites = [formats.load_suite_file(path).suite for path in files]
    sizes = [len(formats.sentences(suite)) for suite in suites if suite is not None]
    assert len(sizes) == len(files)
    assert calls == [sum(sizes)]

    # Each suite's file is what scoring that suite alone gives.
    for path in files:
        together = json.loads((out / f"{path.stem}.results.json").read_text())
        alone_path = tmp_path / f"{path.stem}.alone.json"
        call_command(
            "score", "--model", str(tiny_gpt2), "--suite", str(path), "--out", str(alone_path)
        )
        alone = json.loads(alone_path.read_text())
        assert together["meta"]["name"] == alone["meta"]["name"]
        a, b = region_values(together), region_values(alone)
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert (x is None) == (y is None)
            if x is not None and y is not None:
                assert abs(x - y) <= TOL
        ours, theirs = together["results"], alone["results"]
        assert ours["accuracy"] == theirs["accuracy"]
        assert [i["outcomes"] for i in ours["items"]] == [i["outcomes"] for i in theirs["items"]]
        # Diagnostics are the suite's own, not the whole call's.
        assert ours["diagnostics"] == theirs["diagnostics"]
        assert ours["diagnostics"]["tokens"] > 0
    assert calls[1:] == sizes


def test_several_suites_need_an_output_folder(tiny_gpt2: Path) -> None:  # noqa: F811
    with pytest.raises(CommandError, match="several suites need --out FOLDER"):
        call_command("score", "--model", str(tiny_gpt2), "--suite", str(EXAMPLES))


def test_a_model_that_cannot_load_is_reported(tmp_path: Path) -> None:
    suite = sorted(EXAMPLES.glob("*.json"))[0]
    with pytest.raises(CommandError, match="ModelLoadError"):
        call_command(
            "score", "--model", str(tmp_path), "--suite", str(suite), "--out", str(tmp_path / "x")
        )


def test_timings_say_where_the_time_went(tiny_gpt2: Path, tmp_path: Path) -> None:  # noqa: F811
    import io

    from evaluations.scoring import clear_model_cache

    clear_model_cache()  # the model is loaded in this call, so its steps are timed
    stderr = io.StringIO()
    call_command(
        "score", "--model", str(tiny_gpt2), "--suite", str(EXAMPLES), "--out",
        str(tmp_path / "out"), "--timings", stderr=stderr,
    )  # fmt: skip
    lines = [line for line in stderr.getvalue().splitlines() if line.startswith("timings ")]
    assert len(lines) == 1
    timings = json.loads(lines[0].removeprefix("timings "))
    for step in ("read_suites", "load_model", "scoring", "writing"):
        assert timings[step] >= 0, step
    # Seconds since the process started (read from /proc): more than what came after it.
    assert timings["before_handle"] is None or timings["before_handle"] > 0
    # CPU seconds of this process up to scoring: it imported torch and loaded a model.
    assert timings["cpu_at_scoring"] > 0
    steps = timings["load_steps"]
    assert {"config_and_tokenizer", "weights"} <= set(steps)
    assert "tree_check" in steps or "checks_cached" in steps
    assert sum(steps.values()) <= timings["load_model"] + 0.01  # each rounded to 1 ms


def test_the_command_as_a_process_writes_everything_before_its_quick_exit(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`manage.py score` ends its process without tearing the interpreter down: what it
    printed and wrote is complete, and it exits 0 (or with the command's error)."""
    import os

    suite = EXAMPLES / "agreement_local.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GYM_SCORING_CACHE": str(tmp_path / "checks")}
    done = manage(env, "score", "--model", str(tiny_gpt2), "--suite", str(suite), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)  # the whole document reached the pipe
    expected = formats.load_suite_file(suite).suite
    assert expected is not None
    assert len(document["items"]) == len(expected["items"])
    assert "accuracy" in done.stderr

    failed = manage(
        env, "score", "--model", str(tmp_path / "none"), "--suite", str(suite), timeout=600
    )
    assert failed.returncode == 1 and "none" in failed.stderr and failed.stdout == ""


def test_word_probability_corrected_is_named_in_the_results(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    suite = sorted(EXAMPLES.glob("*.json"))[0]
    plain_path, corrected_path = tmp_path / "plain.json", tmp_path / "corrected.json"
    call_command(
        "score", "--model", str(tiny_gpt2), "--suite", str(suite), "--out", str(plain_path)
    )
    call_command(
        "score",
        "--model",
        str(tiny_gpt2),
        "--suite",
        str(suite),
        "--word-probability",
        "corrected",
        "--out",
        str(corrected_path),
    )
    plain = json.loads(plain_path.read_text())
    corrected = json.loads(corrected_path.read_text())
    # Off (the default) leaves the file as it was: nothing names the option.
    assert "word_probability" not in plain["results"]
    assert "word_probability" not in plain["results"]["diagnostics"]
    assert corrected["results"]["word_probability"] == "corrected"
    assert "word-initial tokens" in corrected["results"]["diagnostics"]["word_boundary"]
    sums = [
        (a["metric_value"]["sum"], b["metric_value"]["sum"])
        for x, y in zip(plain["items"], corrected["items"], strict=True)
        for cx, cy in zip(x["conditions"], y["conditions"], strict=True)
        for a, b in zip(cx["regions"], cy["regions"], strict=True)
    ]
    assert any(abs(a - b) > TOL for a, b in sums if a is not None and b is not None)
    # Only the sum is corrected: the other metrics are over tokens, as before.
    means = [
        (a["metric_value"]["mean"], b["metric_value"]["mean"])
        for x, y in zip(plain["items"], corrected["items"], strict=True)
        for cx, cy in zip(x["conditions"], y["conditions"], strict=True)
        for a, b in zip(cx["regions"], cy["regions"], strict=True)
    ]
    assert all(abs(a - b) <= TOL for a, b in means if a is not None and b is not None)


# Runs manage.py's main() as `manage.py score` does and, from an exit handler (run
# before the command's quick exit), reports which modules the process imported.
SCORE_PROCESS_PROBE = """
import atexit, json, runpy, sys
def report():
    names = ("celery", "kombu", "gym.celery", "rest_framework.serializers",
             "evaluations.runs.lifecycle", "evaluations.syntaxgym.services",
             "evaluations.minimal_pairs.services", "evaluations.training.services")
    print("IMPORTED " + json.dumps([n for n in names if n in sys.modules]))
atexit.register(report)
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


def test_the_score_process_imports_neither_celery_nor_the_run_kinds(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`manage.py score` sends no task and needs no run kind: its process starts without
    the Celery app and the kinds' services (a second of CPU before scoring begins), and
    scores the same as the command called in a process that has them."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    suite = EXAMPLES / "agreement_local.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GYM_SCORING_CACHE": str(tmp_path / "checks")}
    env.pop("GYM_LEAN_STARTUP", None)
    out = tmp_path / "lean.json"
    done = subprocess.run(
        [sys.executable, "-c", SCORE_PROCESS_PROBE, "score", "--model", str(tiny_gpt2),
         "--suite", str(suite), "--out", str(out)],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("IMPORTED ")]
    assert json.loads(lines[-1].removeprefix("IMPORTED ")) == []

    # This (pytest) process has Celery and every run kind: the same results.
    full = tmp_path / "full.json"
    call_command("score", "--model", str(tiny_gpt2), "--suite", str(suite), "--out", str(full))
    assert region_values(json.loads(out.read_text())) == region_values(json.loads(full.read_text()))
