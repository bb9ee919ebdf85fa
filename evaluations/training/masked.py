"""What a masked model's training has of its own; the rest (data, optimizer, schedule,
checkpoints, resume, several devices) is `evaluations.training.causal`'s.

- The tokenizer: byte-level BPE (as RoBERTa's) or WordPiece (BERT's) trained on the
  corpus, each with [PAD], [UNK], [CLS], [SEP] and [MASK], framing a text as
  `[CLS] text [SEP]` (see MASKED_TOKENIZERS for why BPE is the default).
- The data: each line as the tokenizer frames it when it scores (`add_special_tokens`),
  every token's id with a flag, in its top bit, for the first token of a word (the fast
  tokenizer's `word_ids`: its pre-tokenizer's words, as the scorer's masks see them).
- The objective, BERT's masked LM (Devlin et al. 2019): each token that is not a special
  one is chosen with `mask_probability` (with whole-word masking each word is, with all
  its tokens); a chosen token is [MASK] in 80% of cases, a random token that is not a
  special one in 10%, itself in 10%, and the loss is the cross-entropy of the chosen
  tokens. The choice is a function of the seed, the step and the micro-batch's place in
  it (numpy's generator, on the CPU), so a resumed run, a run on several devices and a
  run on a GPU mask the same tokens; the validation blocks are masked the same way at
  every checkpoint.
- The model: transformers' BertForMaskedLM, dropout 0 as the causal models'.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from evaluations.baseline import byte_level_bpe
from evaluations.training.options import MaskedOptions, ModelShape, padded_vocab

PAD, UNKNOWN, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIALS = (PAD, UNKNOWN, CLS, SEP, MASK)
# The top bit of a token in the token file: the token begins a word. Vocabularies are at
# most 262,144 rows (SHAPE_MAXIMA), far below it.
WORD_START = np.uint32(1 << 31)
IGNORED = -100  # the label of a token that is not predicted
# BERT's split of the chosen tokens: [MASK] below 0.8, a random token below 0.9, else kept.
MASKED_SHARE, RANDOM_SHARE = 0.8, 0.1
# The first number of the validation masks' seeds: a step number never reaches it.
VALIDATION_STREAM = 2**40


def train_tokenizer(lines: Iterable[str], vocab: int, kind: str = "bpe") -> Any:
    """A masked model's tokenizer trained on `lines` to `vocab` tokens at most, as a
    transformers fast tokenizer that frames a text as `[CLS] text [SEP]`: "bpe"
    (byte-level, as RoBERTa's) or "wordpiece" (BERT's: words and punctuation split
    apart, cased, `##` inside a word, [UNK] for a word with a character the corpus never
    had)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "bpe":
        core = byte_level_bpe(lines, vocab, trim_offsets=True, special_tokens=SPECIALS)
    else:
        core = Tokenizer(models.WordPiece(unk_token=UNKNOWN))
        core.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
        core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        core.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab, special_tokens=list(SPECIALS), show_progress=False
        )
        core.train_from_iterator(lines, trainer=trainer)
        core = _numbered_stably(core)
    _frame(core, kind)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNKNOWN,
        cls_token=CLS,
        sep_token=SEP,
        mask_token=MASK,
    )


def _numbered_stably(core: Any) -> Any:
    """`core` with its pieces numbered in an order of their own: tokenizers numbers a
    trained WordPiece's pieces in the order of a hash map, which differs from one process
    to the next (the same pieces, other ids: another model from the same seed). The
    special tokens keep their first ids, then the pieces by length and text."""
    from tokenizers import Tokenizer

    data = json.loads(core.to_str())
    vocab = data["model"]["vocab"]

    def order(piece: str) -> tuple[int, int, str]:
        special = SPECIALS.index(piece) if piece in SPECIALS else len(SPECIALS)
        return special, len(piece), piece

    data["model"]["vocab"] = {piece: n for n, piece in enumerate(sorted(vocab, key=order))}
    return Tokenizer.from_str(json.dumps(data))


def _frame(core: Any, kind: str) -> None:
    """`[CLS] text [SEP]` (and `[CLS] a [SEP] b [SEP]` for a pair) when a text is encoded
    with its special tokens; byte-level BPE keeps its offsets without the spaces."""
    from tokenizers import processors

    cls, sep = (CLS, core.token_to_id(CLS)), (SEP, core.token_to_id(SEP))
    if kind == "bpe":
        core.post_processor = processors.RobertaProcessing(
            sep, cls, trim_offsets=True, add_prefix_space=False
        )
        return
    core.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1", special_tokens=[cls, sep]
    )


def line_tokens(tokenizer: Any, lines: list[str]) -> np.ndarray:
    """The lines as the tokenizer frames them, one after another, as uint32 ids with
    WORD_START on the first token of each word (and on each special token)."""
    encoded = tokenizer(lines, add_special_tokens=True, return_attention_mask=False)
    flat: list[int] = []
    for index, ids in enumerate(encoded["input_ids"]):
        words = encoded.word_ids(index)
        for position, (token, word) in enumerate(zip(ids, words, strict=True)):
            starts = word is None or position == 0 or words[position - 1] != word
            flat.append(token | int(WORD_START) if starts else token)
    return np.asarray(flat, dtype=np.uint32)


def bert_model(shape: ModelShape, tokenizer: Any) -> Any:
    """A BertForMaskedLM of `shape` for `tokenizer` (its rows padded, see VOCAB_MULTIPLE),
    with its output layer tied to the token embedding."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=padded_vocab(len(tokenizer)),
        hidden_size=shape.width,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=4 * shape.width,
        max_position_embeddings=shape.context,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=getattr(tokenizer, "pad_token_id", None) or 0,
    )
    return BertForMaskedLM(config)


@dataclass(frozen=True)
class Masking:
    """BERT's masking of blocks for one training (see the module's docstring)."""

    seed: int
    probability: float
    whole_word: bool
    mask_id: int
    special: np.ndarray  # ids never chosen
    replacements: np.ndarray  # ids a random replacement is drawn from

    @classmethod
    def of(cls, options: MaskedOptions, tokenizer: Any) -> Masking:
        special = np.asarray(sorted(set(tokenizer.all_special_ids)), dtype=np.int64)
        rows = np.arange(len(tokenizer), dtype=np.int64)
        return cls(
            seed=options.seed,
            probability=options.mask_probability,
            whole_word=options.whole_word_masking,
            mask_id=int(tokenizer.mask_token_id),
            special=special,
            replacements=rows[~np.isin(rows, special)],
        )

    def arrays(self, blocks: np.ndarray, key: Sequence[int]) -> tuple[np.ndarray, ...]:
        """(inputs, labels) of `blocks` (rows of the token file) as int64: the inputs with
        the chosen tokens replaced, the labels the chosen tokens' ids and IGNORED
        elsewhere. `key` (the step and the micro-batch, or VALIDATION_STREAM and the
        block) seeds the choice with the training's seed."""
        rng = np.random.default_rng([self.seed, *key])
        ids = (blocks & ~WORD_START).astype(np.int64)
        draws = rng.random(ids.shape)
        if self.whole_word:
            # Every token takes the draw of its word's first token (a block that starts
            # inside a word: that piece is a word of its own).
            starts = (blocks & WORD_START) != 0
            columns = np.arange(ids.shape[1])
            first = np.maximum.accumulate(np.where(starts, columns, 0), axis=1)
            draws = np.take_along_axis(draws, first, axis=1)
        chosen = (draws < self.probability) & ~np.isin(ids, self.special)
        split = rng.random(ids.shape)
        randoms = self.replacements[rng.integers(len(self.replacements), size=ids.shape)]
        inputs = np.where(chosen & (split < MASKED_SHARE), self.mask_id, ids)
        swapped = chosen & (split >= MASKED_SHARE) & (split < MASKED_SHARE + RANDOM_SHARE)
        inputs = np.where(swapped, randoms, inputs)
        return inputs, np.where(chosen, ids, IGNORED)

    @staticmethod
    def weight(arrays: tuple[np.ndarray, ...]) -> int:
        """The tokens predicted: a loss's weight in a mean over micro-batches."""
        return int((arrays[1] != IGNORED).sum())

    @staticmethod
    def loss(model: Any, inputs: torch.Tensor, labels: torch.Tensor, tokens: int) -> torch.Tensor:
        """Mean cross-entropy of the chosen tokens (0 when a micro-batch has none), over
        the first `tokens` logits (the tokenizer's), as `lm_loss`."""
        logits = model(input_ids=inputs).logits[..., :tokens].float()
        summed = torch.nn.functional.cross_entropy(
            logits.reshape(-1, tokens), labels.reshape(-1), ignore_index=IGNORED, reduction="sum"
        )
        return summed / (labels != IGNORED).sum().clamp(min=1)
