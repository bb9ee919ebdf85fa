"""Word probabilities done right: the word-boundary correction of summed token surprisals.

With a tokenizer that marks the START of a word on the word's first token (byte-level
BPE's "Ġ", SentencePiece's "▁"), summing a word's token surprisals leaves out that the
word ends there: the next token, which begins a new word, pays for it. The corrected
surprisal of a word w after context c (Pimentel & Meister 2024, "How to compute the
probability of a word"; Oh & Schuler 2024) is

    S(w | c) = -log p(t_1..t_k | c) - log B(c·w) + log B(c)

where B(x) is the probability that the token after x begins a new word: the mass of the
tokens spelled with the marker, plus the end-of-sequence token when the model has one
(so after a sentence's last word, "the sentence ends" also counts as a boundary). At the
start of the text, a tokenizer that does not mark the first word (GPT-2 spells it "The",
not "ĠThe") treats every token as beginning a word, so B = 1 there.

Tokenizers that mark word ENDS or continuations (WordPiece's "##") or nothing at all do
not get the correction: their values are left as they are, and `WordBoundary.reason`
says why. No torch here: the web side may read WORD_PROBABILITY.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# "tokens": a region or word is the sum of its token surprisals (the stored meaning).
# "corrected": that sum - log2 B(after) + log2 B(before), where the tokenizer allows it.
WORD_PROBABILITY = ("tokens", "corrected")

MARKERS = ("Ġ", "▁")


@dataclass(frozen=True)
class WordBoundary:
    """How a tokenizer marks where words begin, and the tokens that begin one."""

    marker: str | None  # "Ġ" or "▁"; None when the correction does not apply
    ids: tuple[int, ...]  # token ids whose spelling begins a word (and EOS)
    first_word_marked: bool  # does the text's first word carry the marker too?
    eos_token_id: int | None
    reason: str  # what was found, for the run's record

    @property
    def applies(self) -> bool:
        return self.marker is not None and bool(self.ids)


def word_boundary(tokenizer: Any) -> WordBoundary:
    """Inspect the tokenizer once: which marker it puts on word-initial tokens, if any."""
    first = tokenizer.convert_ids_to_tokens(tokenizer("a", add_special_tokens=False)["input_ids"])
    both = tokenizer.convert_ids_to_tokens(tokenizer("a b", add_special_tokens=False)["input_ids"])
    second = both[len(first)] if len(both) > len(first) and both[: len(first)] == first else None
    marker = next((m for m in MARKERS if second is not None and second.startswith(m)), None)
    eos = getattr(tokenizer, "eos_token_id", None)
    if marker is None:
        return WordBoundary(
            None,
            (),
            False,
            eos,
            "the tokenizer marks no word starts (no 'Ġ' or '▁' on a word's first "
            "token): values are the sums of token surprisals",
        )
    ids = sorted(
        index for token, index in tokenizer.get_vocab().items() if token.startswith(marker)
    )
    if eos is not None and eos not in ids:
        ids.append(eos)
    marked = bool(first) and first[0].startswith(marker)
    return WordBoundary(
        marker,
        tuple(ids),
        marked,
        eos,
        f"{len(ids)} word-initial tokens ('{marker}'"
        + (", end-of-sequence" if eos is not None else "")
        + ")",
    )


def corrected_sum(
    total: float | None, log_boundary: list[float] | None, first: int, after: int
) -> float | None:
    """A region's summed surprisal (bits) of tokens first..after-1, corrected.

    `log_boundary[t]` is log2 B before content token t (t = number of tokens: after the
    last one). None (missing) when a value it needs is missing.
    """
    if total is None or log_boundary is None:
        return total
    before, end = log_boundary[first], log_boundary[after]
    if before != before or end != end:  # NaN: the position was not scored
        return None
    return total - end + before
