"""How the causal trainer frames its text (issue 46, point 6): every training line
follows the separator `<|endoftext|>`, as the scorer frames a sentence (the start token,
then the sentence), and the stream of them is cut into context-length blocks, as GPT-2's
documents were. Held here on the token file the trainer writes and reads."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from evaluations.training import causal
from tests.training.conftest import sample_sentences

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_line_follows_the_separator(tmp_path) -> None:
    lines = sample_sentences("tree_depth")[:200]
    corpus = tmp_path / "book.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = causal.CausalOptions(
        shape=causal.PRESETS["tiny"], steps=1, micro_batch=2, checkpoints=1
    )
    causal.train_causal(lambda: iter(lines), lambda: iter(lines[:5]), tmp_path / "m", options)
    data = tmp_path / "m" / causal.DATA_DIR
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "m")
    eot = int(tokenizer.bos_token_id)
    assert tokenizer.bos_token == "<|endoftext|>" and eot == causal.separator_id(tokenizer)
    stream = np.fromfile(data / "train.bin", dtype=np.uint32)
    # The stream is the lines, each after one separator, in order: nothing else.
    expected: list[int] = []
    for line in lines:
        expected += [eot, *tokenizer(line, add_special_tokens=False)["input_ids"]]
    assert stream.tolist() == expected
    starts = np.flatnonzero(stream == eot)
    assert len(starts) == len(lines)
    # Each line, read from after its separator, is the sentence the scorer scores.
    ends = [*starts[1:], len(stream)]
    decoded = [tokenizer.decode(stream[s + 1 : e]) for s, e in zip(starts, ends, strict=True)]
    assert decoded == lines
    # The blocks are the stream cut into contexts (the last partial one dropped).
    blocks = causal._blocks(data / "train.bin", options.shape.context)
    assert blocks.reshape(-1).tolist() == expected[: blocks.size]
