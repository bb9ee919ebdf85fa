"""Shared fixtures and helpers of the probing tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel, ProbingRun
from evaluations.probing import services as probing_services
from evaluations.probing.worker import run_probing
from tests.conftest import SHARED_DATA, single_torch_thread

SAMPLES = SHARED_DATA / "senteval-probing"


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny matrices gain nothing from threads, and on a busy machine the spinning
    threads of a second core cost ten times the work itself."""
    with single_torch_thread():
        yield


def sample(task: str) -> Path:
    """The shared SentEval sample of `task` (the test is skipped where it is absent)."""
    path = SAMPLES / f"{task}.txt"
    if not path.exists():
        pytest.skip(f"shared sample {path} is absent")
    return path


@pytest.fixture
def gpt2(tiny_gpt2: Path) -> LanguageModel:  # noqa: F811
    """The tiny GPT-2 registered as a model of the site (modules that probe a loaded
    model directly define their own `gpt2`)."""
    return model_registry.model_register(source=str(tiny_gpt2), name="tiny-gpt2")


def worker_results(run: ProbingRun) -> dict:
    """What a GPU worker computes for the run, here in this process."""
    return run_probing(probing_services.PROBING_RUNS.build_payload(run))


def done_run(run: ProbingRun) -> ProbingRun:
    """The run with what a worker computes for it stored (the store must take it)."""
    assert probing_services.probing_results_store(
        run_id=run.pk, attempt=run.attempt, results=worker_results(run)
    )
    run.refresh_from_db()
    return run
