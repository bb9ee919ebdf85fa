"""Causal LM training from scratch on the CPU: seeded (the same seed gives the same loss),
a run stopped at a checkpoint resumes to the same final model as one trained straight
through, the schedules, and folders that `manage.py score --model` reads as they are."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from django.core.management import CommandError, call_command
from safetensors.torch import load_file

from evaluations.training import causal
from tests.conftest import EXAMPLES
from tests.training.conftest import sentences_file, train_causal

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    return sentences_file(folder / "bookcorpus.txt", "tree_depth", "past_present")


def train(corpus: Path, out: Path, *extra: str) -> str:
    options = ("--preset", "tiny", "--steps", "8", "--micro-batch", "4", "--checkpoints", "4")
    return train_causal(corpus, out, *options, *extra)


def info(out: Path) -> dict:
    return json.loads((out / causal.INFO_NAME).read_text())


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_schedules() -> None:
    assert causal.checkpoint_steps(8, 4) == [1, 2, 4, 8]
    assert causal.checkpoint_steps(1000, 8) == [1, 3, 7, 19, 52, 139, 373, 1000]
    assert causal.checkpoint_steps(3, 8) == [1, 2, 3]
    options = causal.CausalOptions(shape=causal.PRESETS["tiny"], steps=100, warmup_steps=10)
    assert [causal.lr_factor(s, options) for s in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert causal.lr_factor(10, options) == 1.0
    # Half-way through the decay: the middle of 0.1 .. 1.
    assert causal.lr_factor(55, options) == pytest.approx(0.55)
    assert causal.lr_factor(100, options) == pytest.approx(0.1)
    # Gradient accumulation to the token batch: 4 sequences of 64 per pass, 1000 tokens.
    options = causal.CausalOptions(
        shape=causal.PRESETS["tiny"], steps=1, micro_batch=4, batch_tokens=1000
    )
    assert (options.accumulation, options.tokens_per_step) == (4, 1024)


def test_same_seed_same_loss_and_resume_equals_straight(corpus, tmp_path) -> None:
    straight = tmp_path / "straight"
    printed = train(corpus, straight)
    assert f"{straight}/checkpoint-256: step 1, 256 tokens" in printed
    first = info(straight)
    assert first["steps_done"] == 8 and first["tokens_seen"] == 8 * 4 * 64
    assert [c["tokens"] for c in first["checkpoints"]] == [256, 512, 1024, 2048]
    assert math.isfinite(first["final_loss"]) and math.isfinite(first["final_validation_loss"])
    # The loss falls from about ln(vocabulary).
    assert first["log"][0]["loss"] > first["final_loss"]

    again = tmp_path / "again"
    train(corpus, again)
    assert info(again)["final_loss"] == first["final_loss"]
    other = tmp_path / "other-seed"
    train(corpus, other, "--seed", "1")
    assert info(other)["final_loss"] != first["final_loss"]

    resumed = tmp_path / "resumed"
    printed = train(corpus, resumed, "--stop-after-step", "4")
    assert "stopped early: 4 steps" in printed
    assert not (resumed / "model.safetensors").exists()
    printed = train(corpus, resumed)
    assert "8 steps (resumed at step 4)" in printed
    assert info(resumed)["final_loss"] == pytest.approx(first["final_loss"], abs=1e-6)
    assert [e["loss"] for e in info(resumed)["log"] if "loss" in e] == pytest.approx(
        [e["loss"] for e in first["log"] if "loss" in e], abs=1e-6
    )
    final, expected = weights(resumed), weights(straight)
    assert final.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.allclose(final[name], tensor, atol=1e-6), name


def test_folders_score_as_they_are(corpus, tmp_path) -> None:
    out = tmp_path / "llama"
    train(corpus, out, "--preset", "tiny-llama", "--steps", "2", "--checkpoints", "2")
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    for model in (out, out / "checkpoint-256"):
        results = tmp_path / f"{model.name}.json"
        call_command(
            "score", "--model", str(model), "--suite", str(EXAMPLES / "agreement_local.json"),
            "--out", str(results), stderr=io.StringIO(),
        )  # fmt: skip
        document = json.loads(results.read_text())
        assert 0.0 <= document["results"]["accuracy"] <= 1.0


def test_bad_options(corpus, tmp_path) -> None:
    with pytest.raises(
        CommandError, match=r"the width \(64\) must be a multiple of the heads \(3\)"
    ):
        train(corpus, tmp_path / "x", "--heads", "3")
    with pytest.raises(CommandError, match="unknown preset|invalid choice"):
        train(corpus, tmp_path / "x", "--preset", "huge")
    small = tmp_path / "small.txt"
    small.write_text("a b c\nd e f\n")
    with pytest.raises(CommandError, match="less than one context of 64"):
        train(small, tmp_path / "y", "--vocab", "300")


def test_keep_states_keeps_the_last_training_state_and_every_model(corpus, tmp_path) -> None:
    out = tmp_path / "kept"
    train(corpus, out, "--keep-states", "1")
    folders = sorted(out.glob("checkpoint-*"), key=lambda f: int(f.name.split("-")[1]))
    assert [f.name for f in folders] == [f"checkpoint-{t}" for t in (256, 512, 1024, 2048)]
    assert [(f / causal.STATE_NAME).exists() for f in folders] == [False, False, False, True]
    assert all((f / "model.safetensors").is_file() for f in folders)
    with pytest.raises(CommandError, match="keep_states is 0 \\(all\\) or more; got -1"):
        train(corpus, tmp_path / "z", "--keep-states", "-1")


def test_an_odd_vocabulary_trains_padded_and_is_saved_with_its_own_rows(corpus, tmp_path) -> None:
    """300 tokens train in a 320-row output layer (a multiple of 64, for the matrix
    products), but no probability goes to the 20 unused rows: the saved model has 300 rows,
    and its own loss on the validation text is the validation loss training reported."""
    from transformers import AutoModelForCausalLM

    out = tmp_path / "odd"
    train(corpus, out, "--vocab", "300", "--steps", "4", "--checkpoints", "3")
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == 300
    saved = weights(out)
    assert saved["transformer.wte.weight"].shape == (300, 64)
    assert "lm_head.weight" not in saved  # tied to the embedding, saved once
    recorded = info(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert recorded["parameters"] == sum(p.numel() for p in model.parameters())
    assert causal.padded_vocab(300) == 320 and causal.padded_vocab(320) == 320

    # The validation loss of the saved model, computed by transformers itself.
    blocks = causal._blocks(out / causal.DATA_DIR / "validation.bin", 64)
    assert len(blocks) > 0
    losses, sizes = [], []
    with torch.no_grad():
        for start in range(0, min(len(blocks), causal.MAX_EVAL_BLOCKS), 4):
            ids = torch.from_numpy(blocks[start : start + 4].astype("int64"))
            losses.append(float(model(input_ids=ids, labels=ids).loss))
            sizes.append(len(ids))
    own = sum(loss * size for loss, size in zip(losses, sizes, strict=True)) / sum(sizes)
    assert own == pytest.approx(recorded["final_validation_loss"], abs=1e-5)

    # A stopped run resumes from the 300-row checkpoint to the same model.
    resumed = tmp_path / "odd-resumed"
    train(corpus, resumed, "--vocab", "300", "--steps", "4", "--checkpoints", "3",
          "--stop-after-step", "2")  # fmt: skip
    assert "resumed at step 2" in train(
        corpus, resumed, "--vocab", "300", "--steps", "4", "--checkpoints", "3"
    )
    again = weights(resumed)
    for name, tensor in saved.items():
        assert torch.allclose(again[name], tensor, atol=1e-6), name


class _Touches:
    """Unpickled, it would create `path`: what a hostile training state could run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Path]]:
        return (Path.touch, (self.path,))


def test_a_training_state_is_read_as_data_on_the_cpu_and_one_holding_code_is_refused(
    corpus, tmp_path
) -> None:
    # Issue 46, defect 1: the state was loaded with weights_only=False (a file that holds
    # code runs it) and onto the training device (the random state then leaves the CPU,
    # where torch.set_rng_state needs it).
    out = tmp_path / "run"
    train(corpus, out, "--stop-after-step", "4")
    folder = causal.latest_checkpoint(out)
    assert folder is not None
    state = causal.load_training_state(folder)
    assert state["step"] == 4
    rng = state["rng"]["torch"]
    assert (rng.device.type, rng.dtype) == ("cpu", torch.uint8)

    marker = tmp_path / "ran"
    torch.save({**state, "optimizer": _Touches(marker)}, folder / causal.STATE_NAME)
    with pytest.raises(
        CommandError, match="it calls getattr, which no training state holds"
    ) as refused:
        train(corpus, out)
    assert "training_state.pt is not a training state Gym wrote" in str(refused.value)
    assert not marker.exists()


def test_tf32_is_on_for_a_gpu_training_only() -> None:
    # Issue 46, defect 3: training switched TF32 on for the whole worker process, so a
    # later float32 scoring in the same GPU worker ran at lower precision.
    def flags() -> tuple[bool, bool]:
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    before = flags()
    with causal.training_precision("cuda"):
        assert flags() == (True, True)
    assert flags() == before
    with causal.training_precision("cpu"):
        assert flags() == before
    with pytest.raises(RuntimeError), causal.training_precision("cuda:0"):
        raise RuntimeError("the training failed")
    assert flags() == before
