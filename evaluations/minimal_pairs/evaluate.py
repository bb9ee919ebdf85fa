"""Evaluate: a minimal-pair set through the scoring engine -> the token table.

Each sentence is scored whole, its first token conditioned on BOS (causal LMs); under
metric "lm_eval" the string scored is " " + sentence, as lm-evaluation-harness's BLiMP
tasks score it (target delimiter " " after the end-of-text token; the offsets stay the sentence's). Masked
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
    word_probability: str = "tokens",
    metric: str = "nlpscholar",
) -> list[SentenceScore]:
    """Each sentence scored whole, masked LMs over the model-independent words: what the
    command line and the site's workers both run. `word_probability="corrected"` also
    measures log2 B at each token (evaluations.scoring.boundary) where the model allows.
    `metric="lm_eval"` scores the harness's string: " " + sentence after BOS."""
    from evaluations.scoring import score_sentences

    return score_sentences(
        model,
        [[sentence] for sentence in sentences],
        token_budget=token_budget,
        progress=progress,
        word_ids=sentence_words,
        word_probability=word_probability,
        lead=HARNESS_DELIMITER if metric == "lm_eval" else "",
    )


# lm-evaluation-harness's target delimiter: its multiple-choice tasks score the choice
# after the context ("" for BLiMP: the end-of-text token alone) and this delimiter.
HARNESS_DELIMITER = " "


def word_corrections(
    owners: list[int], log_boundary: list[float | None] | None
) -> dict[int, float | None]:
    """Token position -> what its word's last token adds for the boundary correction
    (None: a log2 B it needs is missing). Empty without `log_boundary`."""
    if log_boundary is None:
        return {}
    spans: dict[int, tuple[int, int]] = {}
    for position, owner in enumerate(owners):
        first, _last = spans.get(owner, (position, position))
        spans[owner] = (first, position)
    shift: dict[int, float | None] = {}
    for owner, (first, last) in spans.items():
        before, after = log_boundary[first], log_boundary[last + 1]
        if owner < 0:
            continue  # tokens of no word (spaces only) get nothing
        shift[last] = None if before is None or after is None else before - after
    return shift


def word_surprisals(score: SentenceScore) -> list[float | None]:
    """Each token's surprisal as the token table holds it: the engine's, plus, on each
    word's last token, the word's boundary correction where the score has log2 B
    (`word_probability="corrected"`; None where a log2 B it needs is missing). What
    `minimal_pairs evaluate` writes and the site's workers store."""
    surprisals = [token.surprisal for token in score.tokens]
    if score.log_boundary is None:
        return surprisals
    owners = word_of_tokens(
        split_words(score.text), [(t.start, t.end) for t in score.tokens], score.text
    )
    for position, correction in word_corrections(owners, score.log_boundary).items():
        surp = surprisals[position]
        if surp is not None:
            surprisals[position] = None if correction is None else surp + correction
    return surprisals


def evaluate_minimal_pairs(
    model: LoadedModel | NgramModel,
    pair_set: MinimalPairSet,
    *,
    model_name: str,
    tokenizer_name: str | None = None,
    token_budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    word_probability: str = "tokens",
    metric: str = "nlpscholar",
) -> TokenTable:
    """One row per token of every sentence, in NLPScholar's evaluate columns.

    With `word_probability="corrected"` (and a model it applies to) each word's last
    token also carries the word's boundary correction, log2 B before the word minus
    log2 B after it, so that a word's summed `surp` is its corrected surprisal and any
    run of words (an ROI, a word with its punctuation) sums to its own corrected value:
    the corrections telescope. `prob` stays 2**-surp."""
    tokenizer_name = tokenizer_name or model_tokenizer_name(model) or model_name
    scores = score_pair_sentences(
        model,
        [sentence.sentence for sentence in pair_set.sentences],
        token_budget=token_budget,
        progress=progress,
        word_probability=word_probability,
        metric=metric,
    )
    rows: list[tuple] = []
    for sentence, score in zip(pair_set.sentences, scores, strict=True):
        words = split_words(score.text)
        owners = word_of_tokens(words, [(t.start, t.end) for t in score.tokens], score.text)
        surprisals = word_surprisals(score)
        for token, owner, surp in zip(score.tokens, owners, surprisals, strict=True):
            word = words[owner] if owner >= 0 else None
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
