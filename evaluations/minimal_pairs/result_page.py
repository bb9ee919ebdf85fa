"""The result page of one model on one minimal-pair set: the analysis options from the
query string, the analysis summary (computed once per evaluation and options, then read
from the cache), one page of pairs with each sentence's words and their values, and the
bar chart's data.

The page's work does not grow with the set: a cached summary holds every pair's numbers
as arrays, and the words shown are those of the page's pairs only (two queries, one
analysis of those sentences' tokens through the same function).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.core.paginator import Page, Paginator

from evaluations.minimal_pairs import results as pair_results
from evaluations.minimal_pairs.analysis import (
    OUTPUT_NAMES,
    AnalysisOptions,
    analyze_minimal_pairs,
)
from evaluations.minimal_pairs.summary import SHOW, ConditionGroup, PairSummary, summarize
from evaluations.minimal_pairs.tokens import TokenTable
from evaluations.models import PairEvaluation, PairSentenceTokens
from suites.formats import minimal_pairs as mp
from suites.models import MinimalPairSet, PairSetSentence

PAIRS_PER_PAGE = 50
# A summary is a few megabytes at BLiMP size; it only changes when the run is retried.
CACHE_SECONDS = 24 * 3600
CACHE_VERSION = 1
OPTION_NAMES = ("metric", "pred_measure", "word_summary", "punctuation", "conditions")


class PageQueryError(ValueError):
    """The query string asks for something the page cannot show; the message says what
    and how to fix it."""


def default_conditions(pair_set: MinimalPairSet) -> tuple[str, ...]:
    """Without `conditions` in the query, the page groups pairs by the set's first
    condition column (a chart of one bar says little), if it has one."""
    usable = [c for c in pair_set.condition_columns if c not in OUTPUT_NAMES]
    return tuple(usable[:1])


def page_options(
    query: Mapping[str, Any], pair_set: MinimalPairSet, metric: str = "nlpscholar"
) -> AnalysisOptions:
    """The analysis options of the query string (`pair_results.analysis_options` checks
    them); checkboxes may repeat `conditions`, the API's comma-separated form works too."""
    params: dict[str, str] = {k: str(query.get(k)) for k in OPTION_NAMES if k in query}
    getlist = getattr(query, "getlist", None)
    if getlist is not None and "conditions" in query:
        params["conditions"] = ",".join(v for v in getlist("conditions") if v)
    elif "conditions" not in query:
        params["conditions"] = ",".join(default_conditions(pair_set))
    try:
        return pair_results.analysis_options(params, metric)
    except pair_results.PairAnalysisInvalid as bad:
        raise PageQueryError(str(bad)) from None


def options_query(options: AnalysisOptions) -> list[tuple[str, str]]:
    """The options as query parameters (for links that keep them)."""
    return [
        ("metric", options.metric),
        ("pred_measure", options.pred_measure),
        ("word_summary", options.word_summary),
        ("punctuation", options.punctuation),
        ("conditions", ",".join(options.conditions)),
    ]


# --- the summary, cached ----------------------------------------------------------------


def _cache_key(evaluation: PairEvaluation, options: AnalysisOptions) -> str:
    # A retry stores new tokens under the same id: attempt and finish time tell them apart.
    finished = evaluation.finished_at.isoformat() if evaluation.finished_at else ""
    described = json.dumps(
        [evaluation.pk, evaluation.attempt, finished, *options_query(options)], ensure_ascii=True
    )
    digest = hashlib.sha256(described.encode()).hexdigest()[:32]
    return f"gym:pair-summary:{CACHE_VERSION}:{evaluation.pk}:{digest}"


def pair_summary(evaluation: PairEvaluation, options: AnalysisOptions) -> PairSummary:
    """The analysis summary of a done run under `options`, from the cache when an
    earlier request computed it. Raises PairAnalysisInvalid when the options do not fit
    the set (an unknown condition column, a pair whose sentences differ in one); that
    answer is cached too, so a bad link does not analyse the whole set every time."""
    key = _cache_key(evaluation, options)
    summary = cache.get(key)
    if isinstance(summary, str):
        raise pair_results.PairAnalysisInvalid(summary, path="analysis")
    if summary is None:
        pair_results.metric_check(evaluation, options.metric)
        data = pair_results.run_set_data(evaluation)
        try:
            summary = summary_build(pair_results.token_table(evaluation), data, options)
        except pair_results.PairAnalysisInvalid as invalid:
            cache.set(key, str(invalid), CACHE_SECONDS)
            raise
        cache.set(key, summary, CACHE_SECONDS)
    return summary


def summary_build(
    tokens: TokenTable, data: mp.MinimalPairSet, options: AnalysisOptions
) -> PairSummary:
    analysis = pair_results.analyze_tokens(tokens, data, options, ("by_pair", "by_cond"))
    return summarize(analysis, {pairid: i for i, pairid in enumerate(data.pairs())})


def summary_warm(run_id: int) -> None:
    """Put the analysis a run's result page opens with into the cache (the store task
    calls it once the run's tokens are committed). Only where the cache is shared
    between processes (GYM_CACHE_URL): a worker's own local-memory cache would keep it
    where no page reads it."""
    if "locmem" in settings.CACHES["default"]["BACKEND"].lower():
        return
    evaluation = PairEvaluation.objects.select_related("model", "pair_set").get(pk=run_id)
    try:
        _summary_for(evaluation, {})
    except PageQueryError:
        pass  # cached as such: the page says why


# --- one page of pairs --------------------------------------------------------------------


@dataclass
class WordCell:
    text: str
    value: float | None
    roi: bool
    position: int


@dataclass
class SentenceWords:
    sentid: str
    words: list[WordCell]
    whole: bool  # no ROI: the whole sentence counts


@dataclass
class PairRow:
    pairid: str
    group: ConditionGroup
    expected: list[SentenceWords]
    unexpected: list[SentenceWords]
    expected_value: float
    unexpected_value: float
    diff: float
    acc: bool
    tie: bool


def pair_rows(
    evaluation: PairEvaluation, summary: PairSummary, positions: np.ndarray
) -> list[PairRow]:
    """The pairs at `positions` (into the summary's arrays) with their sentences word by
    word. Two queries and one by_word analysis of those sentences, whatever the set's
    size."""
    if len(positions) == 0:
        return []
    indexes = summary.pair_index[positions].tolist()
    stored = _pair_members(evaluation, indexes)
    words = _sentence_words(evaluation, summary.options, [s for _, s in stored])
    by_pair: dict[int, list[mp.PairSentence]] = {}
    for index, sentence in stored:
        by_pair.setdefault(index, []).append(sentence)
    rows = []
    for position, index in zip(positions.tolist(), indexes, strict=True):
        members = by_pair.get(index, [])
        rows.append(
            PairRow(
                pairid=summary.pairid[position],
                group=summary.groups[int(summary.group[position])],
                expected=[words[s.sentid] for s in members if s.comparison == mp.EXPECTED],
                unexpected=[words[s.sentid] for s in members if s.comparison == mp.UNEXPECTED],
                expected_value=float(summary.expected[position]),
                unexpected_value=float(summary.unexpected[position]),
                diff=float(summary.diff[position]),
                acc=bool(summary.acc[position]),
                tie=bool(summary.tie[position]),
            )
        )
    return rows


def _pair_members(
    evaluation: PairEvaluation, indexes: list[int]
) -> list[tuple[int, mp.PairSentence]]:
    """(pair ordinal, sentence) of the pairs numbered `indexes`, in the set's order: one
    range query on the current rows, or the kept version of an outdated run's content."""
    if not evaluation.outdated:
        stored = PairSetSentence.objects.filter(
            pair_set_id=evaluation.pair_set_id, pair_index__in=indexes
        ).order_by("position")
        return [(s.pair_index or 0, _plain(s)) for s in stored]
    data = pair_results.run_set_data(evaluation)
    ordinal = {pairid: i for i, pairid in enumerate(data.pairs())}
    wanted = set(indexes)
    return [
        (ordinal[s.pairid], s)
        for s in data.sentences
        if s.pairid is not None and ordinal[s.pairid] in wanted
    ]


def _sentence_words(
    evaluation: PairEvaluation, options: AnalysisOptions, sentences: list[mp.PairSentence]
) -> dict[str, SentenceWords]:
    """Each sentence's words as the analysis forms them under `options` (punctuation
    folding, word summary), with the value the page shows: surprisal in bits, or the
    probability when the options compare probabilities."""
    subset = mp.MinimalPairSet(
        sentences=sentences,
        columns=list(evaluation.pair_set.columns),
        condition_columns=list(evaluation.pair_set.condition_columns),
        source_format=evaluation.pair_set.source_format,
    )
    analysis = analyze_minimal_pairs(
        _page_tokens(evaluation, sentences),
        subset,
        replace(options, conditions=()),
        tables=("by_word",),
    )
    assert analysis.by_word is not None
    column = "prob" if options.pred_measure == "prob" else "surp"
    rois = {s.sentid: set(s.roi) if s.roi is not None else set() for s in sentences}
    found: dict[str, list[WordCell]] = {s.sentid: [] for s in sentences}
    for row in analysis.by_word.as_dicts():
        sentid, position = str(row["sentid"]), int(row["wordpos_mod"])
        value = float(row[column])
        found[sentid].append(
            WordCell(
                text=str(row["word"]),
                value=None if np.isnan(value) else value,
                roi=position in rois[sentid],
                position=position,
            )
        )
    return {
        s.sentid: SentenceWords(sentid=s.sentid, words=found[s.sentid], whole=s.roi is None)
        for s in sentences
    }


def _page_tokens(evaluation: PairEvaluation, sentences: list[mp.PairSentence]) -> TokenTable:
    """The token table of these sentences only (one query)."""
    stored = PairSentenceTokens.objects.filter(
        evaluation=evaluation, sentid__in=[s.sentid for s in sentences]
    ).values_list("sentid", "tokens")
    texts = {s.sentid: s.sentence for s in sentences}
    return pair_results.packed_table(
        ((sentid, texts.get(sentid), packed) for sentid, packed in stored),
        model_name=evaluation.model.name,
        tokenizer=pair_results.tokenizer_name(evaluation),
    )


def _plain(sentence: PairSetSentence) -> mp.PairSentence:
    return mp.PairSentence(
        sentid=sentence.sentid,
        sentence=sentence.sentence,
        pairid=sentence.pairid or None,
        comparison=sentence.comparison or None,
        roi=tuple(sentence.roi) if sentence.roi is not None else None,
        conditions=dict(sentence.conditions),
        row=sentence.position + 2,
    )


# --- the page -------------------------------------------------------------------------------


@dataclass
class PairResultPage:
    evaluation: PairEvaluation
    summary: PairSummary
    options: AnalysisOptions
    group: ConditionGroup | None
    show: str
    counts: dict[str, int]
    page: Page
    rows: list[PairRow]
    # Whether the options are the ones the stored accuracy (and the leaderboard) uses.
    default_options: bool

    @property
    def outdated(self) -> bool:
        return self.evaluation.outdated

    @property
    def value_label(self) -> str:
        return {"prob": "probability", "perplexity": "perplexity"}.get(
            self.options.pred_measure, "surprisal (bits)"
        )

    @property
    def word_label(self) -> str:
        return "probability" if self.options.pred_measure == "prob" else "surprisal (bits)"


def _parse_group(raw: str, summary: PairSummary) -> int | None:
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= len(summary.groups):
        raise PageQueryError(
            f"cond={raw[:30]!r} is not a condition group: choose a number from 1 to "
            f"{len(summary.groups)} (the rows of the by-condition table), or leave it out"
        )
    return int(raw)


def _summary_for(
    evaluation: PairEvaluation, query: Mapping[str, Any]
) -> tuple[AnalysisOptions, PairSummary]:
    """The options and summary the query asks for. Without `conditions` the page groups
    by the set's first condition column; where that does not fit (a pair's sentences
    differ in it) it groups nothing rather than answering 400 to a plain link."""
    options = page_options(query, evaluation.pair_set, evaluation.metric)
    try:
        return options, pair_summary(evaluation, options)
    except pair_results.PairAnalysisInvalid as bad:
        if "conditions" in query or not options.conditions:
            raise PageQueryError(str(bad)) from None
    options = replace(options, conditions=())
    try:
        return options, pair_summary(evaluation, options)
    except pair_results.PairAnalysisInvalid as bad:
        raise PageQueryError(str(bad)) from None


def result_page(evaluation: PairEvaluation, query: Mapping[str, Any]) -> PairResultPage:
    """Everything the result page of a done run shows for the query string. Raises
    PageQueryError (a 400 with its message) for options or filters it cannot use."""
    options, summary = _summary_for(evaluation, query)
    group = _parse_group(str(query.get("cond", "")).strip(), summary)
    show = str(query.get("show", "")).strip()
    if show not in SHOW:
        raise PageQueryError(
            f"show={show[:30]!r} is not a list of pairs: use failing, passing or ties, "
            "or leave it out for all"
        )
    positions = summary.selection(group=group, show=show)
    page = Paginator(positions, PAIRS_PER_PAGE).get_page(query.get("page"))
    return PairResultPage(
        evaluation=evaluation,
        summary=summary,
        options=options,
        group=summary.groups[group - 1] if group else None,
        show=show,
        counts=summary.counts(group),
        page=page,
        rows=pair_rows(evaluation, summary, np.asarray(page.object_list, dtype=np.int64)),
        default_options=replace(options, conditions=())
        == replace(pair_results.run_options(evaluation), conditions=()),
    )


def pair_outcomes(evaluation: PairEvaluation) -> dict[int, bool]:
    """Whether each pair passes (pair ordinal in the set -> acc; ties fail) under the
    options of the stored accuracy and the leaderboard: what the paired test of two runs
    reads. Read from the summary the result page opens with (cached, warmed by the store
    task); a pair's outcome does not depend on the condition columns it is grouped by.
    Raises PageQueryError where the run's sentences are no longer stored."""
    _options, summary = _summary_for(evaluation, {})
    return dict(zip(summary.pair_index.tolist(), summary.acc.tolist(), strict=True))
