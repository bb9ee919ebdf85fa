"""Evaluate: a minimal-pair set through the scoring engine -> the token table.

Each sentence is scored whole, its first token conditioned on BOS (causal LMs); masked
LMs use PLL-word-l2r over the set's own words (suites.formats.minimal_pairs.split_words),
not the tokenizer's, so `wordpos` and ROIs mean the same words for every model. A token
belongs to the word holding its first non-space character.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from evaluations.minimal_pairs.tokens import TokenTable
from suites.formats.minimal_pairs import MinimalPairSet, split_words, word_of_tokens

if TYPE_CHECKING:
    from evaluations.scoring import LoadedModel
    from evaluations.scoring.ngram import NgramModel
    from evaluations.scoring.schema import SentenceScore


def sentence_words(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """The engine's `word_ids` hook: each token's word in the model-independent words."""
    return word_of_tokens(split_words(text), offsets, text)


def model_tokenizer_name(model: Any) -> str:
    """The tokenizer's name as NLPScholar writes it ("" for a model without one)."""
    return str(getattr(getattr(model, "tokenizer", None), "name_or_path", "") or "")


def score_pair_sentences(
    model: Any,
    sentences: Sequence[str],
    *,
    token_budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[SentenceScore]:
    """Each sentence scored whole, masked LMs over the model-independent words: what the
    command line and the site's workers both run."""
    from evaluations.scoring import score_sentences

    return score_sentences(
        model,
        [[sentence] for sentence in sentences],
        token_budget=token_budget,
        progress=progress,
        word_ids=sentence_words,
    )


def evaluate_minimal_pairs(
    model: LoadedModel | NgramModel,
    pair_set: MinimalPairSet,
    *,
    model_name: str,
    tokenizer_name: str | None = None,
    token_budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TokenTable:
    """One row per token of every sentence, in NLPScholar's evaluate columns."""
    tokenizer_name = tokenizer_name or model_tokenizer_name(model) or model_name
    scores = score_pair_sentences(
        model,
        [sentence.sentence for sentence in pair_set.sentences],
        token_budget=token_budget,
        progress=progress,
    )
    rows: list[tuple] = []
    for sentence, score in zip(pair_set.sentences, scores, strict=True):
        words = split_words(score.text)
        owners = word_of_tokens(words, [(t.start, t.end) for t in score.tokens], score.text)
        for token, owner in zip(score.tokens, owners, strict=True):
            word = words[owner] if owner >= 0 else None
            surp = token.surprisal
            rows.append(
                (
                    token.text,
                    sentence.sentid,
                    word.text if word else "",
                    owner,
                    model_name,
                    tokenizer_name,
                    bool(word and word.punctuation),
                    None if surp is None else math.pow(2.0, -surp),
                    surp,
                )
            )
    return TokenTable.from_rows(rows)
