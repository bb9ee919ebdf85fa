"""The loss log a run's row keeps is thinned (issue 46, defect 5): every step's loss was
one JSON field rewritten at each report and sent whole to the browser every 3 s. The row
keeps about LOG_POINTS entries, first and last steps and every validation loss among
them; the whole log is the model folder's loss.jsonl."""

from __future__ import annotations

from typing import Any

import pytest

from evaluations.training import services
from evaluations.training.options import LOG_POINTS, log_stride, thin_log
from tests.training.conftest import run_with_checkpoints


def log(steps: int, every: int = 100) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for step in range(1, steps + 1):
        entries.append({"step": step, "tokens": 64 * step, "loss": 5.0 - step / steps})
        if step % every == 0:
            entries.append({"step": step, "tokens": 64 * step, "validation_loss": 4.0})
    return entries


def test_a_short_log_is_kept_whole() -> None:
    whole = log(LOG_POINTS)
    assert thin_log(whole, LOG_POINTS) == whole and log_stride(LOG_POINTS) == 1


@pytest.mark.parametrize("steps", [501, 3000, 100_003])
def test_a_long_log_is_thinned_stably(steps) -> None:
    whole = log(steps, every=max(1, steps // 10))
    thinned = thin_log(whole, steps)
    train = [e for e in thinned if "loss" in e]
    assert len(train) <= LOG_POINTS + 2
    assert train[0]["step"] == 1 and train[-1]["step"] == steps
    assert [e for e in thinned if "validation_loss" in e] == [
        e for e in whole if "validation_loss" in e
    ]
    # Thinning what was thinned changes nothing; nor does thinning at each report.
    assert thin_log(thinned, steps) == thinned
    kept: list[dict[str, Any]] = []
    for start in range(0, len(whole), 977):
        kept = thin_log(kept + whole[start : start + 977], steps)
    assert kept == thinned


@pytest.mark.django_db
def test_the_row_keeps_a_thinned_log(book_corpus) -> None:
    run = run_with_checkpoints(
        book_corpus, "long", [], options={"steps": 3000}, status="running", attempt=1
    )
    whole = log(3000, every=300)
    for start in range(0, len(whole), 250):  # the worker's reports
        assert services.training_log_append(
            run_id=run.pk, attempt=1, entries=whole[start : start + 250]
        )
    run.refresh_from_db()
    assert run.log == thin_log(whole, 3000)
    assert len(run.log) <= LOG_POINTS + 2 + 10
    assert run.log[0]["step"] == 1 and run.log[-1]["step"] == 3000
