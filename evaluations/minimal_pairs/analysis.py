"""NLPScholar's MinimalPair analysis: token table -> by_word, by_pair, by_cond.

One function, `analyze_minimal_pairs`, behind the pages, the API and the command line.
Columns and their order follow NLPScholar's output files; Gym adds columns only at the
end (`tie`, `pairs`, `ties`, `word`).

Where Gym departs from NLPScholar on purpose (see the README):
- Punctuation `previous` folds a punctuation token into the nearest earlier word that
  is not punctuation, so a run of several marks ("?!", `."`) folds as a whole
  (NLPScholar moves each mark back one position, so only the first of a run folds).
  Punctuation with no such word (a sentence-initial quote) joins the first word.
- `next` mirrors it: sentence-final punctuation, with no word after it, joins the
  previous word (NLPScholar gives it a position past the end, an extra word).
- `ignore` leaves punctuation tokens out (NLPScholar treats `ignore` like `separate`).
- Word positions are renumbered 0, 1, 2, ... within each sentence after folding.
- Ties (expected and unexpected equally predictable) are not successes, as in
  NLPScholar, but they are counted and shown (`tie`, `ties`).
- Conditions are kept as separate values, never joined with `_` and split again, so a
  value may hold any text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

import numpy as np

from evaluations.minimal_pairs.tokens import TokenTable
from suites.formats.minimal_pairs import (
    EXPECTED,
    PAIRID,
    RESERVED,
    MinimalPairSet,
    cell_value,
)

PRED_MEASURES = ("surp", "prob", "perplexity")
WORD_SUMMARIES = ("mean", "sum")
PUNCTUATION = ("previous", "next", "separate", "ignore")
# How a pair is compared (docs/minimal-pairs.md, "Metrics"): "nlpscholar" is NLPScholar's
# analysis (the measure over the ROI words, each word summarised over its tokens);
# "sentence" and "lm_eval" compare the whole sentence's summed surprisal, the BLiMP
# family's log probability (lm_eval: of tokens scored as lm-evaluation-harness scores
# them, a leading space after the end-of-text token; the analysis is the same sum).
METRICS = ("sentence", "nlpscholar", "lm_eval")
WHOLE_SENTENCE = ("sentence", "lm_eval")
TABLES = ("by_word", "by_pair", "by_cond")

BY_PAIR_VALUES = ("expected", "unexpected", "diff", "acc", "tie")
BY_COND_VALUES = ("acc", "diff", "expected", "unexpected", "macrodiff", "pairs", "ties")
# Condition columns may not shadow the columns the analysis writes.
OUTPUT_NAMES = {"model", "wordpos_mod", "prob", "surp", "word", *BY_PAIR_VALUES, *BY_COND_VALUES}


class AnalysisError(ValueError):
    """The options, the data or the predictions do not allow the analysis."""


@dataclass(frozen=True)
class AnalysisOptions:
    pred_measure: str = "surp"
    word_summary: str = "mean"
    punctuation: str = "previous"
    conditions: tuple[str, ...] = ()
    metric: str = "nlpscholar"

    @property
    def whole_sentence(self) -> bool:
        return self.metric in WHOLE_SENTENCE

    def check(self, pair_set: MinimalPairSet) -> None:
        problems = []
        if self.metric not in METRICS:
            problems.append(f"metric must be one of {', '.join(METRICS)}")
        if self.pred_measure not in PRED_MEASURES:
            problems.append(f"pred_measure must be one of {', '.join(PRED_MEASURES)}")
        if self.word_summary not in WORD_SUMMARIES:
            problems.append(f"word_summary must be one of {', '.join(WORD_SUMMARIES)}")
        if self.punctuation not in PUNCTUATION:
            problems.append(f"punctuation must be one of {', '.join(PUNCTUATION)}")
        for name in self.conditions:
            if name not in pair_set.condition_columns:
                known = ", ".join(pair_set.condition_columns) or "none"
                problems.append(f"{name!r} is not a condition column (the set has: {known})")
            elif name in OUTPUT_NAMES:
                problems.append(f"the condition column {name!r} clashes with an output column")
        if len(set(self.conditions)) != len(self.conditions):
            problems.append("a condition column is named twice")
        if problems:
            raise AnalysisError("; ".join(problems))


@dataclass
class Table:
    """Rows in `columns` order; `index` is the row label pandas would write first."""

    columns: list[str]
    # A row's cells are of their columns' types (str, int, float, bool): typed per
    # column by the reader, not here.
    rows: list[list[Any]]
    index: list[int]

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass
class Analysis:
    options: AnalysisOptions
    by_word: Table | None = None
    by_pair: Table | None = None
    by_cond: Table | None = None
    warnings: list[str] = field(default_factory=list)


def id_sort_keys(values: Sequence[str]) -> list[tuple]:
    """Sort keys for ids: numeric when every id is a number (as pandas would read the
    column), text otherwise."""
    try:
        return [(float(v),) for v in values]
    except ValueError:
        return [(v,) for v in values]


@dataclass
class _Words:
    """Word-level arrays, sorted by (model, sentence, position)."""

    model: np.ndarray  # model code
    sent: np.ndarray  # sentence index in the pair set
    pos: np.ndarray  # renumbered position
    prob: np.ndarray
    surp: np.ndarray
    first_token: np.ndarray  # index (into the sorted token arrays) of the first token
    n_tokens: np.ndarray
    order: np.ndarray  # sorted -> original token index


def _fold(
    key: np.ndarray, pos: np.ndarray, punct: np.ndarray, mode: str
) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, target position) per token (tokens sorted by key, position)."""
    n = len(key)
    keep = np.ones(n, dtype=bool)
    if mode == "separate" or n == 0:
        return keep, pos
    if mode == "ignore":
        return ~punct, pos
    index = np.arange(n)
    before = np.maximum.accumulate(np.where(~punct, index, -1))
    before_ok = (before >= 0) & (key[np.clip(before, 0, None)] == key)
    after = np.minimum.accumulate(np.where(~punct, index, n)[::-1])[::-1]
    after_ok = (after < n) & (key[np.clip(after, None, n - 1)] == key)
    first, second = (before, after) if mode == "previous" else (after, before)
    first_ok, second_ok = (before_ok, after_ok) if mode == "previous" else (after_ok, before_ok)
    source = np.where(first_ok, first, np.where(second_ok, second, index))
    source = np.where(punct, source, index)
    return keep, pos[source]


def _words(
    tokens: TokenTable, sent: np.ndarray, model: np.ndarray, n_sent: int, options: AnalysisOptions
) -> _Words:
    key = model.astype(np.int64) * n_sent + sent
    order = np.lexsort((np.arange(len(key)), tokens.wordpos, key))
    key = key[order]
    keep, target = _fold(key, tokens.wordpos[order], tokens.punctuation[order], options.punctuation)
    if not keep.all():
        order, key, target = order[keep], key[keep], target[keep]
    # Folding keeps positions non-decreasing within a sentence; sort again to be sure.
    resort = np.lexsort((np.arange(len(key)), target, key))
    order, key, target = order[resort], key[resort], target[resort]
    n = len(key)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Words(empty, empty, empty, np.zeros(0), np.zeros(0), empty, empty, order)
    change = np.empty(n, dtype=bool)
    change[0] = True
    change[1:] = (key[1:] != key[:-1]) | (target[1:] != target[:-1])
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, n))
    prob = np.add.reduceat(tokens.prob[order], starts) / counts
    surp = np.add.reduceat(tokens.surp[order], starts)
    if options.word_summary == "mean":
        surp = surp / counts
    word_key = key[starts]
    new_sentence = np.empty(len(starts), dtype=bool)
    new_sentence[0] = True
    new_sentence[1:] = word_key[1:] != word_key[:-1]
    index = np.arange(len(starts))
    first = np.maximum.accumulate(np.where(new_sentence, index, 0))
    return _Words(
        model=word_key // n_sent,
        sent=word_key % n_sent,
        pos=index - first,
        prob=prob,
        surp=surp,
        first_token=starts,
        n_tokens=counts,
        order=order,
    )


def analyze_minimal_pairs(
    tokens: TokenTable,
    pair_set: MinimalPairSet,
    options: AnalysisOptions | None = None,
    *,
    tables: Sequence[str] = TABLES,
) -> Analysis:
    """by_word, by_pair and by_cond (those named in `tables`) of one or more models'
    token tables against the set's sentences, pairs, ROIs and conditions."""
    options = options or AnalysisOptions()
    options.check(pair_set)
    if options.whole_sentence:
        # The sentence's summed token surprisal: every token counts once, whatever its
        # word; the word options that would change it do not apply.
        options = replace(options, pred_measure="surp", word_summary="sum", punctuation="separate")
    for name in tables:
        if name not in TABLES:
            raise AnalysisError(f"{name!r} is not a table; choose from {', '.join(TABLES)}")
    result = Analysis(options=options, warnings=list(pair_set.warnings))
    sentences = pair_set.sentences
    n_sent = len(sentences)
    sent_of = {s.sentid: i for i, s in enumerate(sentences)}
    sent_index = np.fromiter((sent_of.get(v, -1) for v in tokens.sentid), np.int64, len(tokens))
    known = sent_index >= 0
    if not known.all():
        unknown = sorted({tokens.sentid[i] for i in np.flatnonzero(~known)[:1000]})
        result.warnings.append(
            f"{int((~known).sum())} prediction rows have a sentid that is not in the data "
            f"(e.g. {', '.join(unknown[:5])}); they are left out"
        )
    models = sorted(set(tokens.model))
    model_code = {name: i for i, name in enumerate(models)}
    model_index = np.fromiter((model_code[v] for v in tokens.model), np.int64, len(tokens))
    picked = np.flatnonzero(known)
    view = TokenTable(
        token=tokens.token,
        sentid=tokens.sentid,
        word=tokens.word,
        wordpos=tokens.wordpos[picked],
        model=tokens.model,
        tokenizer=tokens.tokenizer,
        punctuation=tokens.punctuation[picked],
        prob=tokens.prob[picked],
        surp=tokens.surp[picked],
    )
    words = _words(view, sent_index[picked], model_index[picked], n_sent, options)
    original = picked[words.order]  # sorted token -> row of `tokens`

    conditions = list(options.conditions)
    if conditions:
        pick = itemgetter(*conditions)
        one = len(conditions) == 1
        cond_of_sentence = [(pick(s.conditions),) if one else pick(s.conditions) for s in sentences]
    else:
        cond_of_sentence = [()] * n_sent

    if "by_word" in tables:
        result.by_word = _by_word(tokens, pair_set, models, words, original, conditions)
    if "by_pair" in tables or "by_cond" in tables:
        if not pair_set.has_pairs:
            raise AnalysisError("the data has no pairid and comparison columns, so no pairs")
        by_pair, pair_cond, pair_model = _by_pair(
            pair_set, models, words, options, conditions, cond_of_sentence
        )
        if "by_pair" in tables:
            result.by_pair = by_pair
        if "by_cond" in tables:
            result.by_cond = _by_cond(by_pair, pair_cond, pair_model, models, conditions)
    return result


def _by_word(
    tokens: TokenTable,
    pair_set: MinimalPairSet,
    models: list[str],
    words: _Words,
    original: np.ndarray,
    conditions: list[str],
) -> Table:
    others = [c for c in pair_set.columns if c != "sentid" and c not in conditions]
    columns = ["model", *conditions, "sentid", "wordpos_mod", "prob", "surp", *others, "word"]
    rows: list[list[Any]] = []
    sentences = pair_set.sentences
    starts = words.first_token.tolist()
    counts = words.n_tokens.tolist()
    origin = original.tolist()
    sent_list = words.sent.tolist()
    pos = words.pos.tolist()
    prob = words.prob.tolist()
    surp = words.surp.tolist()
    model = words.model.tolist()
    cells: dict[int, list[object]] = {}
    for w in range(len(starts)):
        s = sent_list[w]
        if s not in cells:
            sentence = sentences[s]
            cells[s] = [cell_value(sentence, c) for c in others]
        # The word's text: its tokens' words, each once, in order (punctuation folded in).
        parts: list[str] = []
        for t in origin[starts[w] : starts[w] + counts[w]]:
            text = tokens.word[t]
            if not parts or parts[-1] != text:
                parts.append(text)
        sentence = sentences[s]
        rows.append(
            [
                models[model[w]],
                *[sentence.conditions[c] for c in conditions],
                sentence.sentid,
                pos[w],
                prob[w],
                surp[w],
                *cells[s],
                "".join(parts).strip(),
            ]
        )
    return Table(columns=columns, rows=rows, index=list(range(len(rows))))


@dataclass
class _Pairs:
    """The complete pairs of a set: their ids and each sentence's pair and side."""

    ids: list[str]  # pair code -> pairid
    sent_pair: np.ndarray  # sentence index -> pair code (-1: in no complete pair)
    sent_label: np.ndarray  # sentence index -> 0 expected, 1 unexpected

    @property
    def in_pairs(self) -> np.ndarray:
        return self.sent_pair >= 0


def _by_pair(
    pair_set: MinimalPairSet,
    models: list[str],
    words: _Words,
    options: AnalysisOptions,
    conditions: list[str],
    cond_of_sentence: list[tuple[str, ...]],
) -> tuple[Table, list[tuple[str, ...]], list[int]]:
    pairs = _pairs(pair_set)
    pair_cond = _pair_conditions(pair_set, pairs, conditions, cond_of_sentence)
    word_count = _check_tokens(pair_set, models, words, pairs)
    if options.whole_sentence:
        expected, unexpected = _sentence_sums(words, pairs, len(models))
    else:
        roi_keys, has_roi, span = _rois(pair_set, models, words, pairs, word_count, options)
        expected, unexpected = _pair_means(
            words, pairs, len(models), options, roi_keys, has_roi, span
        )
    entries = _pair_order(pair_set, pairs, pair_cond, cond_of_sentence)
    return _by_pair_table(models, conditions, pairs, entries, expected, unexpected, options)


def _pairs(pair_set: MinimalPairSet) -> _Pairs:
    sentences = pair_set.sentences
    dropped = set(pair_set.dropped_pairs)
    pair_ids: list[str] = []
    pair_code: dict[str, int] = {}
    sent_pair = np.full(len(sentences), -1, dtype=np.int64)
    sent_label = np.zeros(len(sentences), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        if sentence.pairid is None or sentence.pairid in dropped:
            continue
        code = pair_code.setdefault(sentence.pairid, len(pair_ids))
        if code == len(pair_ids):
            pair_ids.append(sentence.pairid)
        sent_pair[i] = code
        sent_label[i] = 0 if sentence.comparison == EXPECTED else 1
    return _Pairs(ids=pair_ids, sent_pair=sent_pair, sent_label=sent_label)


def _pair_conditions(
    pair_set: MinimalPairSet,
    pairs: _Pairs,
    conditions: list[str],
    cond_of_sentence: list[tuple[str, ...]],
) -> list[tuple[str, ...] | None]:
    """The conditions of each pair: its sentences must agree on the chosen columns."""
    pair_cond: list[tuple[str, ...] | None] = [None] * len(pairs.ids)
    for i, sentence in enumerate(pair_set.sentences):
        code = int(pairs.sent_pair[i])
        if code < 0:
            continue
        seen = pair_cond[code]
        if seen is None:
            pair_cond[code] = cond_of_sentence[i]
        elif seen != cond_of_sentence[i]:
            column = next(
                c for c, a, b in zip(conditions, seen, cond_of_sentence[i], strict=True) if a != b
            )
            raise AnalysisError(
                f"pair {sentence.pairid!r} mixes values of the condition column {column!r} "
                f"(row {sentence.row}); a pair's sentences must share the conditions "
                "they are grouped by"
            )
    return pair_cond


def _check_tokens(
    pair_set: MinimalPairSet, models: list[str], words: _Words, pairs: _Pairs
) -> np.ndarray:
    """Words per (model, sentence); every paired sentence needs tokens from every model."""
    sentences = pair_set.sentences
    n_sent = len(sentences)
    n_models = len(models)
    word_count = np.bincount(words.model * n_sent + words.sent, minlength=n_models * n_sent)
    word_count = word_count.reshape(n_models, n_sent)
    for m in range(n_models):
        missing = np.flatnonzero(pairs.in_pairs & (word_count[m] == 0))
        if len(missing):
            ids = ", ".join(sentences[i].sentid for i in missing[:5])
            raise AnalysisError(
                f"the predictions of model {models[m]!r} have no tokens for {len(missing)} "
                f"paired sentences (sentid {ids}{', ...' if len(missing) > 5 else ''})"
            )
    return word_count


def _rois(
    pair_set: MinimalPairSet,
    models: list[str],
    words: _Words,
    pairs: _Pairs,
    word_count: np.ndarray,
    options: AnalysisOptions,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(ROI word keys, whether each sentence has an ROI, key span); every ROI position
    must exist in every model's words."""
    sentences = pair_set.sentences
    roi_sent: list[int] = []
    roi_pos: list[int] = []
    max_roi = np.full(len(sentences), -1, dtype=np.int64)
    for i, sentence in enumerate(sentences):
        if sentence.roi is not None and pairs.in_pairs[i]:
            roi_sent.extend([i] * len(sentence.roi))
            roi_pos.extend(sentence.roi)
            max_roi[i] = max(sentence.roi)
    has_roi = max_roi >= 0
    for m in range(len(models)):
        bad = np.flatnonzero(has_roi & (max_roi >= word_count[m]))
        if len(bad):
            s = sentences[int(bad[0])]
            raise AnalysisError(
                f"row {s.row}, column ROI: word position {int(max_roi[bad[0]])} does not exist "
                f"for sentid {s.sentid} with punctuation={options.punctuation} and model "
                f"{models[m]!r} (it has {int(word_count[m][bad[0]])} words); "
                f"{len(bad)} sentence(s) affected"
            )
    span = int(max(int(words.pos.max(initial=0)), int(max_roi.max(initial=0)))) + 1
    roi_keys = np.asarray(roi_sent, dtype=np.int64) * span + np.asarray(roi_pos, dtype=np.int64)
    return roi_keys, has_roi, span


def _pair_means(
    words: _Words,
    pairs: _Pairs,
    n_models: int,
    options: AnalysisOptions,
    roi_keys: np.ndarray,
    has_roi: np.ndarray,
    span: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(expected, unexpected): the measure over each side's ROI words (all words where
    there is no ROI), per model and pair."""
    n_pairs = len(pairs.ids)
    word_key = words.sent * span + words.pos
    selected = pairs.in_pairs[words.sent] & (~has_roi[words.sent] | np.isin(word_key, roi_keys))
    value = words.prob if options.pred_measure == "prob" else words.surp
    group = (words.model * n_pairs + pairs.sent_pair[words.sent]) * 2
    group = (group + pairs.sent_label[words.sent])[selected]
    size = n_models * n_pairs * 2
    sums = np.bincount(group, weights=value[selected], minlength=size)
    counts = np.bincount(group, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (sums / counts).reshape(n_models, n_pairs, 2)
    if options.pred_measure == "perplexity":
        means = np.exp2(means)
    return means[:, :, 0], means[:, :, 1]


def _sentence_sums(words: _Words, pairs: _Pairs, n_models: int) -> tuple[np.ndarray, np.ndarray]:
    """(expected, unexpected): each side's whole-sentence surprisal (the sum over all its
    tokens, ROIs and measure options aside), per model and pair."""
    n_pairs = len(pairs.ids)
    selected = pairs.in_pairs[words.sent]
    group = (words.model * n_pairs + pairs.sent_pair[words.sent]) * 2
    group = (group + pairs.sent_label[words.sent])[selected]
    size = n_models * n_pairs * 2
    sums = np.bincount(group, weights=words.surp[selected], minlength=size).reshape(
        n_models, n_pairs, 2
    )
    return sums[:, :, 0], sums[:, :, 1]


def _pair_order(
    pair_set: MinimalPairSet,
    pairs: _Pairs,
    pair_cond: list[tuple[str, ...] | None],
    cond_of_sentence: list[tuple[str, ...]],
) -> list[tuple[tuple[str, ...], tuple, int]]:
    """(conditions, sort key, pair code) sorted by conditions, pairid, as NLPScholar's
    pivot sorts them; the pairs it drops (incomplete ones) stay in with code -1, so the
    index counts them as it does."""
    n_pairs = len(pairs.ids)
    dropped_set = set(pair_set.dropped_pairs)
    dropped = sorted(dropped_set)
    keys = id_sort_keys(list(pairs.ids) + dropped)
    dropped_cond: dict[str, tuple[str, ...]] = {}
    for i, sentence in enumerate(pair_set.sentences):
        if sentence.pairid in dropped_set:
            dropped_cond.setdefault(sentence.pairid, cond_of_sentence[i])
    entries = [(pair_cond[k] or (), keys[k], k) for k in range(n_pairs)]
    entries += [(dropped_cond.get(pid, ()), keys[n_pairs + j], -1) for j, pid in enumerate(dropped)]
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries


def _by_pair_table(
    models: list[str],
    conditions: list[str],
    pairs: _Pairs,
    entries: list[tuple[tuple[str, ...], tuple, int]],
    expected: np.ndarray,
    unexpected: np.ndarray,
    options: AnalysisOptions,
) -> tuple[Table, list[tuple[str, ...]], list[int]]:
    """The by_pair rows by model, then `entries` order; with each row's conditions and
    model code for by_cond."""
    diff = expected - unexpected
    acc = expected > unexpected if options.pred_measure == "prob" else expected < unexpected
    tie = expected == unexpected
    rows: list[list[Any]] = []
    index: list[int] = []
    out_cond: list[tuple[str, ...]] = []
    out_model: list[int] = []
    e_list, u_list, d_list = expected.tolist(), unexpected.tolist(), diff.tolist()
    a_list, t_list = acc.tolist(), tie.tolist()
    for m in range(len(models)):
        for position, (cond, _, k) in enumerate(entries):
            if k < 0:
                continue
            rows.append(
                [
                    models[m],
                    *cond,
                    pairs.ids[k],
                    e_list[m][k],
                    u_list[m][k],
                    d_list[m][k],
                    bool(a_list[m][k]),
                    bool(t_list[m][k]),
                ]
            )
            index.append(m * len(entries) + position)
            out_cond.append(cond)
            out_model.append(m)
    columns = ["model", *conditions, PAIRID, *BY_PAIR_VALUES]
    return Table(columns=columns, rows=rows, index=index), out_cond, out_model


def _by_cond(
    by_pair: Table,
    pair_cond: list[tuple[str, ...]],
    pair_model: list[int],
    models: list[str],
    conditions: list[str],
) -> Table:
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for row, (m, cond) in enumerate(zip(pair_model, pair_cond, strict=True)):
        groups.setdefault((m, cond), []).append(row)
    e_at = by_pair.columns.index("expected")
    rows: list[list[Any]] = []
    for (m, cond), members in sorted(groups.items()):
        expected = np.array([by_pair.rows[r][e_at] for r in members], dtype=np.float64)
        unexpected = np.array([by_pair.rows[r][e_at + 1] for r in members], dtype=np.float64)
        diff = np.array([by_pair.rows[r][e_at + 2] for r in members], dtype=np.float64)
        acc = np.array([by_pair.rows[r][e_at + 3] for r in members], dtype=np.float64)
        ties = sum(1 for r in members if by_pair.rows[r][e_at + 4])
        e_mean = float(expected.mean())
        u_mean = float(unexpected.mean())
        rows.append(
            [
                models[m],
                *cond,
                float(acc.mean()),
                float(diff.mean()),
                e_mean,
                u_mean,
                e_mean - u_mean,
                len(members),
                ties,
            ]
        )
    columns = ["model", *conditions, *BY_COND_VALUES]
    return Table(columns=columns, rows=rows, index=list(range(len(rows))))


def format_cell(value: object) -> str:
    """A cell as pandas' to_csv writes it (repr floats, True/False, NA for missing)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return "NA" if math.isnan(value) else repr(value)
    return str(value)


def table_to_tsv(table: Table, *, index: bool = True) -> str:
    """A table as NLPScholar writes it: tab-separated, pandas' index as an unnamed first
    column (leave it out with index=False)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n", quotechar='"')
    writer.writerow(["", *table.columns] if index else table.columns)
    for label, row in zip(table.index, table.rows, strict=True):
        cells = [format_cell(v) for v in row]
        writer.writerow([str(label), *cells] if index else cells)
    return out.getvalue()


__all__ = [
    "PRED_MEASURES",
    "PUNCTUATION",
    "RESERVED",
    "TABLES",
    "WORD_SUMMARIES",
    "Analysis",
    "AnalysisError",
    "AnalysisOptions",
    "Table",
    "analyze_minimal_pairs",
    "table_to_tsv",
]
