"""Checkpoint series built locally: a folder of Trainer checkpoints and a stand-in for a
hub repository's revisions (one folder per revision), all copies of one tiny GPT-2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.minimal_pairs.conftest import example_pairs  # noqa: F401 - a fixture the tests use

# Steps of the Trainer folder, and the tokens each checkpoint's trainer_state.json says.
TRAINER_STEPS = (500, 1000, 1500)
TOKENS_PER_STEP = 2048


def copy_model(model: Path, folder: Path) -> Path:
    shutil.copytree(model, folder)
    return folder


@pytest.fixture
def trainer_folder(tiny_gpt2: Path, tmp_path: Path) -> Path:
    """`run/` with checkpoint-500, -1000 and -1500 as the Trainer saves them (model,
    tokenizer and trainer_state.json counting the tokens seen), and a stray folder."""
    run = tmp_path / "run"
    run.mkdir()
    for step in TRAINER_STEPS:
        checkpoint = copy_model(tiny_gpt2, run / f"checkpoint-{step}")
        state = {
            "global_step": step,
            "num_input_tokens_seen": step * TOKENS_PER_STEP,
            "log_history": [{"step": step, "loss": 3.0}],
        }
        (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    (run / "runs").mkdir()  # TensorBoard's logs: not a checkpoint
    return run


@pytest.fixture
def hub_standin(tiny_gpt2: Path, tmp_path: Path) -> Path:
    """`hub/` laid out like a hub repository's revisions: step1000, step2000, step4000
    and BabyLM's chck_1M, chck_10M, chck_100M."""
    hub = tmp_path / "hub"
    hub.mkdir()
    for revision in ("step1000", "step2000", "step4000", "chck_1M", "chck_10M", "chck_100M"):
        copy_model(tiny_gpt2, hub / revision)
    return hub
