"""The built-in baselines, registered by `manage.py gym_bootstrap` on every fresh site.

- The random baseline: a small GPT-2-shaped model with random weights and a byte-level
  BPE tokenizer trained here on the example suites' sentences. It lets a fresh offline
  machine run the whole evaluation path, and it is the chance-level reference row.
- The CMU US English trigram that the `pocketsphinx` wheel ships (BSD licence): a real,
  trained English model that installs offline from the package registry, the classic
  n-gram baseline of SyntaxGym and Hu et al. (2020).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BASELINE_NAME = "random-baseline"
BASELINE_DISPLAY = "Random baseline (untrained GPT-2-style, 2 layers)"
BASELINE_DESCRIPTION = (
    "Random weights, never trained: its accuracy is what chance gives on each suite. "
    "Built on this machine from the example suites so that Gym works offline."
)

NGRAM_BASELINE_NAME = "cmu-us-english-trigram"
NGRAM_BASELINE_DISPLAY = "CMU US English trigram (n-gram baseline)"
NGRAM_BASELINE_DESCRIPTION = (
    "CMU Sphinx's US English trigram (about 72,500 words, lowercase, no punctuation), "
    "as shipped in the pocketsphinx package. Scored word by word: see the README's "
    "n-gram section for how sentences become words and what unknown words cost."
)
NGRAM_BASELINE_URL = "https://github.com/cmusphinx/pocketsphinx"
# The BOS, EOS (and pad) token of the GPT-2-style tokenizers built here and in training.
END_OF_TEXT = "<|endoftext|>"


def cmu_trigram_path() -> Path | None:
    """The trigram inside the installed pocketsphinx package (found without importing
    its native code), or None when the package or the file is missing."""
    spec = importlib.util.find_spec("pocketsphinx")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "model" / "en-us" / "en-us.lm.bin"
        if path.is_file():
            return path
    return None


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
    """The baseline: a 2-layer, 64-wide random GPT-2 with a tokenizer trained on
    `sentences`, marked as the baseline in its folder."""
    random_gpt2(
        target, sentences, vocab_size=vocab_size, seed=seed, n_positions=256, n_embd=64, n_head=2
    )
    (target / "GYM_BASELINE.json").write_text(json.dumps({"random_init_seed": seed}))
    return target


def byte_level_bpe(
    lines: Iterable[str],
    vocab: int,
    *,
    trim_offsets: bool,
    special_tokens: Sequence[str] = (END_OF_TEXT,),
) -> Any:
    """A byte-level BPE (GPT-2 style) `tokenizers.Tokenizer` trained on `lines`, with
    `special_tokens` (`<|endoftext|>` alone by default). With `trim_offsets` False the
    offsets of "Ġword" include the space, as in GPT-2's own tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.ByteLevel(trim_offsets=trim_offsets)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(lines, trainer=trainer)
    return core


def random_gpt2(
    target: Path,
    sentences: Iterable[str],
    *,
    vocab_size: int,
    seed: int = 0,
    n_positions: int = 1024,
    n_embd: int = 768,
    n_layer: int = 2,
    n_head: int = 12,
    output_rows: int | None = None,
    initializer_range: float | None = None,
) -> Path:
    """Train a byte-level BPE tokenizer on `sentences`, build a random-init GPT-2 and save
    both with save_pretrained, so that loading goes through the same path as a hub model.

    The one builder behind the baseline, the tests' tiny models and the benchmark's
    GPT-2-small shape. `output_rows` gives the output layer more rows than the trained
    vocabulary (a full-size model's head on a small corpus); `initializer_range` above
    GPT-2's 0.02 makes a tiny model's outputs depend strongly on context. Seeded: the
    same arguments give the same files.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    target.mkdir(parents=True, exist_ok=True)
    bos = END_OF_TEXT
    # As in GPT-2's own tokenizer.json: offsets of "Ġword" include the space.
    tokenizer = byte_level_bpe(list(sentences), vocab_size, trim_offsets=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=bos, eos_token=bos, unk_token=bos, pad_token=bos
    )
    fast.save_pretrained(target)
    torch.manual_seed(seed)
    eot = tokenizer.token_to_id(bos)
    shape: dict[str, Any] = {}
    if initializer_range is not None:
        shape["initializer_range"] = initializer_range
    config = GPT2Config(
        vocab_size=output_rows or tokenizer.get_vocab_size(),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=eot,
        eos_token_id=eot,
        **shape,
    )
    GPT2LMHeadModel(config).save_pretrained(target)
    return target
