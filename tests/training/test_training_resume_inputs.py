"""A training resumes only what it would have trained (issue 46, defect 2): `train` into a
folder trained on another corpus, with another step count and learning rate, said
"resumed at step 4" and reused the old token file and tokenizer. The folder records its
inputs; another corpus, tokenizer or option is refused with what differs, `--fresh`
starts afresh there, and the same inputs resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError

from evaluations.training import causal
from tests.training.conftest import sentences_file, train_causal

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ("--preset", "tiny", "--micro-batch", "4", "--checkpoints", "2")


@pytest.fixture
def corpora(tmp_path) -> tuple[Path, Path]:
    return (
        sentences_file(tmp_path / "book.txt", "tree_depth"),
        sentences_file(tmp_path / "other.txt", "past_present"),
    )


def test_other_inputs_are_refused_with_what_differs(corpora, tmp_path) -> None:
    book, other = corpora
    out = tmp_path / "m"
    train_causal(book, out, *TINY, "--steps", "4", "--stop-after-step", "1")
    with pytest.raises(CommandError) as caught:
        train_causal(other, out, *TINY, "--steps", "6", "--lr", "0.002")
    message = str(caught.value)
    assert message.startswith(f"{out} holds a training with other inputs, so it cannot be")
    assert "corpus: " in message and "validation: " in message
    assert "learning_rate: 0.001 before, 0.002 now" in message
    assert "steps: 4 before, 6 now" in message
    assert "--fresh" in message
    # Nothing changed: the first training's checkpoint and tokens are still there.
    assert causal.latest_checkpoint(out) == out / "checkpoint-256"
    assert json.loads((out / causal.INPUTS_NAME).read_text())["steps"] == 4


def test_a_tokenizer_of_another_size_is_refused(corpora, tmp_path) -> None:
    book, _other = corpora
    out = tmp_path / "m"
    train_causal(book, out, *TINY, "--steps", "2", "--stop-after-step", "1")
    with pytest.raises(CommandError, match=r"shape: .* before, .* now"):
        train_causal(book, out, *TINY, "--steps", "2", "--vocab", "300")


def test_fresh_starts_again_on_the_new_corpus(corpora, tmp_path) -> None:
    book, other = corpora
    out = tmp_path / "m"
    train_causal(book, out, *TINY, "--steps", "4", "--stop-after-step", "1")
    printed = train_causal(other, out, *TINY, "--steps", "2", "--fresh")
    assert "resumed" not in printed and "model in" in printed
    info = json.loads((out / causal.INFO_NAME).read_text())
    assert info["resumed_from_step"] == 0 and info["steps_done"] == 2
    inputs = json.loads((out / causal.INPUTS_NAME).read_text())
    assert inputs["steps"] == 2 and inputs["corpus"].endswith("lines)")
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-256", "checkpoint-512"]


def test_the_same_inputs_resume(corpora, tmp_path) -> None:
    book, _other = corpora
    out = tmp_path / "m"
    assert "stopped early: 1 steps" in train_causal(
        book, out, *TINY, "--steps", "4", "--stop-after-step", "1"
    )
    # What a resume may change: retention, saves, compile.
    printed = train_causal(book, out, *TINY, "--steps", "4", "--save-every", "3")
    assert "4 steps (resumed at step 1)" in printed


BERT = ("--preset", "tiny-bert", "--micro-batch", "4", "--checkpoints", "2", "--steps", "4")


def test_a_masked_training_resumes_only_with_its_masking(corpora, tmp_path) -> None:
    book, _other = corpora
    out = tmp_path / "m"
    train_causal(book, out, *BERT, "--stop-after-step", "1", kind="masked")
    with pytest.raises(CommandError) as caught:
        train_causal(book, out, *BERT, "--mask-probability", "0.2", kind="masked")
    assert "mask_probability: 0.15 before, 0.2 now" in str(caught.value)
    with pytest.raises(CommandError, match=r"whole_word_masking: false before, true now"):
        train_causal(book, out, *BERT, "--whole-word-masking", kind="masked")
    printed = train_causal(book, out, *BERT, "--save-every", "3", kind="masked")
    assert "4 steps (resumed at step 1)" in printed
