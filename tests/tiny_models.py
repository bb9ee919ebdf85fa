"""Tiny language models built locally, for tests that must not touch the hub.

Each builder trains a tokenizer on a generated corpus, builds a random-init model,
and saves both with `save_pretrained`, so the engine loads them through the same
Auto* code path as a hub model. Everything is seeded: the same folder contents every
time. Builders skip work when the folder already holds a model.

Tests ask for them by the session fixtures `tiny_gpt2`, `tiny_llama` and `tiny_bert`
of tests/conftest.py (each built once a session).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch

CONTEXT = 64  # small on purpose: a 70-token sentence exercises the sliding window

# Large enough that outputs depend strongly on context; with the usual 0.02 a tiny
# random model is nearly uniform and would hide masking or position mistakes.
INIT_RANGE = 0.3
# The size of the Llama- and BERT-style models (config keys both understand).
SMALL_TRANSFORMER: dict[str, Any] = {
    "hidden_size": 48,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}

_DETERMINERS = ["the", "a", "every", "no", "some", "this", "that", "each"]
_NOUNS = [
    "author",
    "senator",
    "pilot",
    "doctor",
    "key",
    "cabinet",
    "table",
    "painting",
    "artist",
    "storm",
    "captain",
    "lawyer",
    "farmer",
    "teacher",
    "student",
    "book",
    "meal",
    "river",
    "village",
    "mountain",
    "reporter",
    "guard",
    "dog",
    "cat",
]
_VERBS = [
    "admired",
    "saw",
    "praised",
    "feared",
    "liked",
    "criticized",
    "painted",
    "ignored",
    "visited",
    "helped",
    "followed",
    "remembered",
]
_INTRANSITIVE = ["laughed", "slept", "arrived", "deteriorated", "subsided", "left", "smiled"]
_ADJECTIVES = ["old", "young", "tall", "quiet", "famous", "careful", "tired", "happy"]
_EXTRA = [
    "The café in Zürich served crème brûlée to a naïve señor.",
    "Façade, résumé, and jalapeño: three words with accents!",
    "東京 and 北京 are cities; Москва is too.",
    "She said “hello” — then left… quickly?",
    "Numbers like 3.14, 1,000 and 42% appear (sometimes) in text.",
    "The doctor's dog, which barked, didn't sleep; why?",
    "An emoji 🙂 or two 🎉 won't hurt.",
    "Antidisestablishmentarianism is an unusually long word.",
]


def corpus(size: int = 400, seed: int = 0) -> list[str]:
    """Simple generated English with punctuation, plus unicode sentences."""
    rng = random.Random(seed)

    def noun_phrase() -> str:
        words = [rng.choice(_DETERMINERS)]
        if rng.random() < 0.4:
            words.append(rng.choice(_ADJECTIVES))
        words.append(rng.choice(_NOUNS))
        return " ".join(words)

    sentences = list(_EXTRA)
    while len(sentences) < size:
        subject = noun_phrase()
        shape = rng.random()
        if shape < 0.3:
            body = f"{subject} {rng.choice(_INTRANSITIVE)}"
        elif shape < 0.6:
            body = f"{subject} {rng.choice(_VERBS)} {noun_phrase()}"
        elif shape < 0.8:
            body = (
                f"{subject} that {noun_phrase()} {rng.choice(_VERBS)} {rng.choice(_INTRANSITIVE)}"
            )
        else:
            body = f"{subject} , who {rng.choice(_VERBS)} {noun_phrase()} , {rng.choice(_INTRANSITIVE)}"
        ending = rng.choice([".", ".", "!", "?", ""])
        sentences.append(body[0].upper() + body[1:] + ending)
    return sentences


def _done(folder: Path) -> bool:
    return (folder / "config.json").exists() and (folder / "tokenizer.json").exists()


def make_gpt2(
    folder: Path, *, n_positions: int = CONTEXT, n_embd: int = 48, n_layer: int = 2
) -> Path:
    """GPT-2-style causal LM with a byte-level BPE tokenizer (offsets keep the space).
    Larger `n_embd`/`n_layer` give a model slow enough to be caught mid-run."""
    from evaluations.baseline import random_gpt2

    folder = Path(folder)
    if _done(folder):
        return folder
    return random_gpt2(
        folder,
        corpus(),
        vocab_size=700,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=4,
        initializer_range=INIT_RANGE,
    )


def make_llama(
    folder: Path, *, max_position_embeddings: int = CONTEXT, split_on_spaces: bool = True
) -> Path:
    """Llama-style causal LM (RoPE, GQA) with a SentencePiece-style Unigram + Metaspace
    tokenizer whose template adds <s> (the engine must not add it twice).

    `split_on_spaces=False` trains the tokenizer the way SentencePiece's
    `split_by_whitespace=false` does: pieces such as "that▁the▁" span several words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    if _done(folder):
        return folder
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first", split=split_on_spaces
    )
    tokenizer.decoder = decoders.Metaspace(
        replacement="▁", prepend_scheme="first", split=split_on_spaces
    )
    trainer = trainers.UnigramTrainer(
        vocab_size=500,
        special_tokens=["<unk>", "<s>", "</s>"],
        unk_token="<unk>",
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", bos)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        **SMALL_TRANSFORMER,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=bos,
        eos_token_id=tokenizer.token_to_id("</s>"),
        tie_word_embeddings=False,
        initializer_range=INIT_RANGE,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def make_bert(folder: Path, *, max_position_embeddings: int = CONTEXT) -> Path:
    """BERT-style masked LM with a lower-casing WordPiece tokenizer ("##" pieces)."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    folder = Path(folder)
    if _done(folder):
        return folder
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=specials, show_progress=False
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(2)
    config = BertConfig(
        vocab_size=tokenizer.get_vocab_size(),
        **SMALL_TRANSFORMER,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.token_to_id("[PAD]"),
        initializer_range=INIT_RANGE,
    )
    BertForMaskedLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
