"""The embedded random baseline: a small GPT-2-shaped model with random weights and a
byte-level BPE tokenizer trained here on the example suites' sentences. It lets a fresh
offline machine run the whole evaluation path, and it is the chance-level reference row
on a leaderboard."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

BASELINE_NAME = "random-baseline"
BASELINE_DISPLAY = "Random baseline (untrained GPT-2-style, 2 layers)"
BASELINE_DESCRIPTION = (
    "Random weights, never trained: its accuracy is what chance gives on each suite. "
    "Built on this machine from the example suites so that Gym works offline."
)


def example_sentences(folder: Path) -> list[str]:
    from evaluations.scoring import build_sentence
    from suites import formats

    sentences = []
    for path in sorted(folder.glob("*.json")):
        result = formats.load_suite_file(path)
        if result.suite is not None:
            sentences += [
                build_sentence(regions)[0] for _i, _c, regions in formats.sentences(result.suite)
            ]
    return sentences


def build_random_gpt2(
    target: Path, sentences: Iterable[str], *, vocab_size: int = 1000, seed: int = 0
) -> Path:
    """Train a byte-level BPE tokenizer on `sentences`, build a random GPT-2 and save both
    with save_pretrained, so that loading goes through the same path as a hub model."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    target.mkdir(parents=True, exist_ok=True)
    bos = "<|endoftext|>"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[bos],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(sentences), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=bos, eos_token=bos, unk_token=bos, pad_token=bos
    )
    fast.save_pretrained(target)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=tokenizer.get_vocab_size(),
        n_positions=256,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.token_to_id(bos),
        eos_token_id=tokenizer.token_to_id(bos),
    )
    GPT2LMHeadModel(config).save_pretrained(target)
    (target / "GYM_BASELINE.json").write_text(json.dumps({"random_init_seed": seed}))
    return target
