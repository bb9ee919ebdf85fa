"""Reads of minimal-pair evaluations that pages, the API and the store share: the token
table (NLPScholar's evaluate columns) rebuilt from the stored packed tokens, the
analysis options of a query string, and the analysis of one evaluation.

Words are recomputed from the set's sentences for tokens that Gym scored (the packed
tokens hold character offsets); imported NLPScholar predictions bring their own words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from django.conf import settings

from evaluations.minimal_pairs.analysis import (
    METRICS,
    PRED_MEASURES,
    PUNCTUATION,
    TABLES,
    WORD_SUMMARIES,
    Analysis,
    AnalysisError,
    AnalysisOptions,
    analyze_minimal_pairs,
)
from evaluations.minimal_pairs.tokens import TokenTable
from evaluations.model_sources import public_source
from evaluations.models import PairEvaluation, PairSentenceTokens
from evaluations.subsets import Subset, canonical_key, run_subset, sample_indices
from gym.errors import ApplicationError
from suites.formats.minimal_pairs import MinimalPairSet, split_words, word_of_tokens
from suites.minimal_pairs import sets as pair_sets
from suites.models import PairSetVersion

# The options of the stored accuracy and of a result page without options: NLPScholar's
# defaults (surprisal, mean over a word's tokens, punctuation joins the previous word).
DEFAULT_OPTIONS = AnalysisOptions()

_CHOICES = {
    "pred_measure": PRED_MEASURES,
    "word_summary": WORD_SUMMARIES,
    "punctuation": PUNCTUATION,
}


class PairAnalysisInvalid(ApplicationError):
    """The analysis options do not fit (400); `path` names the query parameter."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    def error_list(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {"code": self.code, "message": str(self)}
        if self.path:
            entry["path"] = f"$.{self.path}"
        return [entry]


def run_options(evaluation: PairEvaluation) -> AnalysisOptions:
    """The options of a run's stored accuracy: NLPScholar's defaults under the run's metric."""
    return replace(DEFAULT_OPTIONS, metric=evaluation.metric)


def metric_check(evaluation: PairEvaluation, metric: str) -> None:
    """An lm_eval run's tokens are scored on another string (" " + sentence): only its
    own metric reads them, and only such a run has that metric."""
    if (metric == "lm_eval") != (evaluation.metric == "lm_eval"):
        raise PairAnalysisInvalid(
            f"metric {metric!r} does not fit this run, scored under metric "
            f"{evaluation.metric!r}: lm_eval needs a run scored as lm-evaluation-harness "
            "scores (request metric lm_eval); such a run is analysed only so",
            path="metric",
        )


def metric_asked(query: Mapping[str, Any], default: str) -> str:
    """The query's `metric` (one of METRICS), `default` when absent or blank; a
    PairAnalysisInvalid at `metric` otherwise."""
    raw = str(query.get("metric") or "").strip() or default
    if raw not in METRICS:
        raise PairAnalysisInvalid(
            f"metric is {raw[:50]!r}; choose one of {', '.join(METRICS)}", path="metric"
        )
    return raw


def analysis_options(query: Mapping[str, Any], metric: str = "nlpscholar") -> AnalysisOptions:
    """Options from a query string: metric (one of METRICS; `metric`, the run's, when
    absent or blank), pred_measure, word_summary, punctuation (each one of its choices,
    NLPScholar's default when absent or blank) and conditions (condition columns,
    comma-separated; checked against the set by `analyze_evaluation`)."""
    raw_metric = metric_asked(query, metric)
    values: dict[str, str] = {}
    for name, choices in _CHOICES.items():
        raw = query.get(name)
        value = str(raw).strip() if raw is not None else ""
        if not value:
            value = getattr(DEFAULT_OPTIONS, name)
        if value not in choices:
            raise PairAnalysisInvalid(
                f"{name} is {value[:50]!r}; choose one of {', '.join(choices)}", path=name
            )
        values[name] = value
    raw = query.get("conditions")
    conditions = tuple(c.strip() for c in str(raw or "").split(",") if c.strip())
    return AnalysisOptions(conditions=conditions, metric=raw_metric, **values)


def packed_table(
    sentences: Iterable[tuple[str, str | None, Mapping[str, Any]]],
    *,
    model_name: str,
    tokenizer: str,
) -> TokenTable:
    """The token table of packed sentences given as (sentid, sentence text, packed).
    Tokens scored by Gym get the model-independent words of the text; tokens that came
    with their words (imported) keep them. Built column by column from the packed
    arrays: a BLiMP-sized run has 1.4 million tokens, and a tuple per token cost the
    result page seconds."""
    columns: dict[str, list[Any]] = {k: [] for k in ("text", "sentid", "word", "pos", "punct")}
    surprisals: list[float | None] = []
    for sentid, text, packed in sentences:
        texts = list(packed.get("text") or [])
        columns["text"].extend(texts)
        columns["sentid"].extend([sentid] * len(texts))
        surprisals.extend(packed.get("surp") or [None] * len(texts))
        if texts and "word" not in packed:
            _scored_words(text or "", packed, columns)
        else:
            columns["word"].extend(packed.get("word") or [])
            columns["pos"].extend(packed.get("wordpos") or [])
            columns["punct"].extend(packed.get("punct") or [])
    count = len(columns["text"])
    if not all(len(values) == count for values in (*columns.values(), surprisals)):
        raise ValueError("packed tokens: arrays of unequal length")
    return TokenTable(
        token=columns["text"],
        sentid=columns["sentid"],
        word=columns["word"],
        wordpos=np.asarray(columns["pos"], dtype=np.int64),
        model=[model_name] * count,
        tokenizer=[tokenizer] * count,
        punctuation=np.asarray(columns["punct"], dtype=bool),
        prob=np.asarray(
            [math.nan if v is None else math.pow(2.0, -v) for v in surprisals], dtype=np.float64
        ),
        surp=np.asarray([math.nan if v is None else v for v in surprisals], dtype=np.float64),
    )


def _scored_words(text: str, packed: Mapping[str, Any], columns: dict[str, list[Any]]) -> None:
    """The words of tokens that Gym scored: each token's word among the text's own words
    (the one holding its first non-space character)."""
    words = split_words(text)
    owners = word_of_tokens(words, list(zip(packed["start"], packed["end"], strict=True)), text)
    for owner in owners:
        word = words[owner] if owner >= 0 else None
        columns["word"].append(word.text if word else "")
        columns["pos"].append(owner)
        columns["punct"].append(bool(word and word.punctuation))


def tokenizer_name(evaluation: PairEvaluation) -> str:
    """The tokenizer column: its name, a local one's path relative to its model folder
    (no page or export tells how the server's file system looks)."""
    name = str(evaluation.model_info.get("tokenizer") or evaluation.model.source)
    return public_source(name, model_dirs=[*settings.GYM_MODEL_DIRS, settings.VAR_DIR / "models"])


def token_table(evaluation: PairEvaluation) -> TokenTable:
    """The evaluation's evaluate table, sentences in the set's order (two queries)."""
    texts = _run_texts(evaluation)
    stored = PairSentenceTokens.objects.filter(evaluation=evaluation).order_by("position")
    return packed_table(
        (
            (sentid, texts.get(sentid), packed)
            for sentid, packed in stored.values_list("sentid", "tokens")
        ),
        model_name=evaluation.model.name,
        tokenizer=tokenizer_name(evaluation),
    )


def pair_sample(data: MinimalPairSet, subset: Subset | None) -> MinimalPairSet:
    """The set with only the pairs `subset` samples (evaluations.subsets), each pair's
    sentences together, in the set's order; the whole set without a subset. A pair is
    named by its sentences (comparison, text, conditions), not by its pairid, which some
    formats number by line. A set without pairs is sampled by sentence."""
    if subset is None:
        return data
    if data.has_pairs:
        groups = data.pairs()
        keys = [
            canonical_key(sorted([s.comparison or "", s.sentence, s.conditions] for s in group))
            for group in groups.values()
        ]
        kept = sample_indices(keys, subset)
        if kept is None:
            return data
        chosen = set(kept)
        pairids = {pairid for i, pairid in enumerate(groups) if i in chosen}
        sentences = [s for s in data.sentences if s.pairid in pairids]
    else:
        kept = sample_indices(
            [canonical_key([s.sentence, s.conditions]) for s in data.sentences], subset
        )
        if kept is None:
            return data
        sentences = [data.sentences[i] for i in kept]
    return replace(data, sentences=sentences)


def sample_units(pair_set: Any) -> int:
    """What a subset of the set counts: its pairs (its sentences when it has none)."""
    return int(pair_set.pair_count or pair_set.sentence_count)


def run_set_data(evaluation: PairEvaluation) -> MinimalPairSet:
    """The sentences the run was scored on: the set's current ones, or those kept when
    the set was replaced (an outdated run), sampled as the run's subset is. Raises
    PairAnalysisInvalid where they were not kept (the content changed outside the
    replace service)."""
    try:
        data = pair_sets.pair_set_data_at(evaluation.pair_set, evaluation.content_hash)
        return pair_sample(data, run_subset(evaluation))
    except PairSetVersion.DoesNotExist:
        raise PairAnalysisInvalid(
            "the sentences this run was scored on are no longer stored, so it cannot be "
            "analysed; ask for the model on the set's current content",
            path="content_hash",
        ) from None


def _run_texts(evaluation: PairEvaluation) -> dict[str, str]:
    """sentid -> sentence of the content the run scored."""
    if not evaluation.outdated:
        return dict(evaluation.pair_set.sentences.values_list("sentid", "sentence"))
    return {s.sentid: s.sentence for s in run_set_data(evaluation).sentences}


def analyze_tokens(
    tokens: TokenTable,
    data: MinimalPairSet,
    options: AnalysisOptions,
    tables: Sequence[str] = TABLES,
) -> Analysis:
    try:
        return analyze_minimal_pairs(tokens, data, options, tables=tables)
    except AnalysisError as exc:
        raise PairAnalysisInvalid(str(exc), path="analysis") from None


def analyze_evaluation(
    evaluation: PairEvaluation,
    options: AnalysisOptions = DEFAULT_OPTIONS,
    *,
    tables: Sequence[str] = TABLES,
) -> Analysis:
    """by_word, by_pair, by_cond (those in `tables`) of one evaluation under `options`.
    Raises PairAnalysisInvalid (400) for options that do not fit the set or the run."""
    if options is DEFAULT_OPTIONS:
        options = run_options(evaluation)
    metric_check(evaluation, options.metric)
    data = run_set_data(evaluation)
    return analyze_tokens(token_table(evaluation), data, options, tables)


def accuracy_and_ties(analysis: Analysis) -> tuple[float | None, int]:
    """The share of pairs with acc and the number of ties, from a by_cond without
    conditions (one row per model)."""
    table = analysis.by_cond
    if table is None or not table.rows:
        return None, 0
    row: dict[str, Any] = dict(zip(table.columns, table.rows[0], strict=True))
    return float(row["acc"]), int(row["ties"])
