"""What a minimal-pair result page needs of one analysis, in a compact form that is cheap
to cache: the by_cond groups with their Wilson intervals, and every pair's numbers as
numpy arrays, failing pairs first. Pure Python + numpy, no Django: the page's selector
builds it once per evaluation and options and keeps it in the cache, so that a request
for another page of pairs, another condition or the other tab reads it instead of
analysing 134,000 sentences again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluations.minimal_pairs.analysis import Analysis, AnalysisOptions
from evaluations.plots import accuracy_bars
from evaluations.statistics import wilson_interval
from suites.formats.minimal_pairs import PAIRID

# Which pairs the by_pair table lists.
SHOW = ("", "failing", "passing", "ties")


@dataclass(frozen=True)
class ConditionGroup:
    """One by_cond row: the pairs sharing the chosen condition columns' values."""

    number: int  # 1-based, in by_cond order; the page's `cond` parameter
    values: tuple[str, ...]
    acc: float
    diff: float
    expected: float
    unexpected: float
    macrodiff: float
    pairs: int
    ties: int
    low: float
    high: float

    @property
    def passed(self) -> int:
        return round(self.acc * self.pairs)

    @property
    def label(self) -> str:
        return " · ".join(self.values) if self.values else "all pairs"


@dataclass
class PairSummary:
    options: AnalysisOptions
    conditions: tuple[str, ...]
    groups: list[ConditionGroup]
    # Per pair, failing pairs first (ties among them), then passing, each in by_pair order.
    pairid: list[str]
    pair_index: np.ndarray  # the pair's ordinal in the set (first-seen order)
    group: np.ndarray  # index into `groups`
    expected: np.ndarray
    unexpected: np.ndarray
    diff: np.ndarray
    acc: np.ndarray
    tie: np.ndarray
    warnings: list[str] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return len(self.pairid)

    @property
    def passed(self) -> int:
        return int(self.acc.sum())

    @property
    def ties(self) -> int:
        return int(self.tie.sum())

    @property
    def accuracy(self) -> float | None:
        return self.passed / self.pairs if self.pairs else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.passed, self.pairs)

    def selection(self, *, group: int | None = None, show: str = "") -> np.ndarray:
        """Positions (into the per-pair arrays) of the pairs of one condition group
        (1-based; None: every group) and one tab of SHOW, in display order."""
        keep = np.ones(self.pairs, dtype=bool)
        if group is not None:
            keep &= self.group == group - 1
        if show == "failing":
            keep &= ~self.acc
        elif show == "passing":
            keep &= self.acc
        elif show == "ties":
            keep &= self.tie
        return np.flatnonzero(keep)

    def counts(self, group: int | None = None) -> dict[str, int]:
        """How many pairs each tab lists (within one condition group, or all)."""
        return {show or "all": len(self.selection(group=group, show=show)) for show in SHOW}

    def plot(self) -> dict[str, object]:
        return accuracy_bars([(g.label, g.passed, g.pairs) for g in self.groups])


def summarize(analysis: Analysis, pair_index: Mapping[str, int]) -> PairSummary:
    """The summary of a one-model analysis with by_pair and by_cond. `pair_index` maps
    each pairid to its ordinal in the set (where the set page and the stored sentences
    find the pair)."""
    assert analysis.by_pair is not None and analysis.by_cond is not None
    conditions = tuple(analysis.options.conditions)
    groups = _groups(analysis.by_cond.as_dicts(), conditions)
    code = {g.values: g.number - 1 for g in groups}
    rows = analysis.by_pair.as_dicts()
    acc = np.fromiter((bool(r["acc"]) for r in rows), dtype=bool, count=len(rows))
    # Failing first; a stable sort keeps by_pair's order (conditions, pairid) within each.
    rows = [rows[i] for i in np.argsort(acc, kind="stable").tolist()]
    ids = [str(r[PAIRID]) for r in rows]
    return PairSummary(
        options=analysis.options,
        conditions=conditions,
        groups=groups,
        pairid=ids,
        pair_index=_array((pair_index[i] for i in ids), np.int64, len(ids)),
        group=_array(
            (code[tuple(str(r[c]) for c in conditions)] for r in rows), np.int64, len(rows)
        ),
        expected=_array((r["expected"] for r in rows), float, len(rows)),
        unexpected=_array((r["unexpected"] for r in rows), float, len(rows)),
        diff=_array((r["diff"] for r in rows), float, len(rows)),
        acc=_array((r["acc"] for r in rows), bool, len(rows)),
        tie=_array((r["tie"] for r in rows), bool, len(rows)),
        warnings=list(analysis.warnings),
    )


def _array(values: Iterable[object], dtype: type, count: int) -> np.ndarray:
    return np.fromiter(values, dtype=dtype, count=count)


def _groups(rows: Sequence[Mapping[str, Any]], conditions: tuple[str, ...]) -> list[ConditionGroup]:
    groups = []
    for number, row in enumerate(rows, start=1):
        pairs = int(row["pairs"])
        acc = float(row["acc"])
        low, high = wilson_interval(round(acc * pairs), pairs) or (0.0, 0.0)
        groups.append(
            ConditionGroup(
                number=number,
                values=tuple(str(row[c]) for c in conditions),
                acc=acc,
                diff=float(row["diff"]),
                expected=float(row["expected"]),
                unexpected=float(row["unexpected"]),
                macrodiff=float(row["macrodiff"]),
                pairs=pairs,
                ties=int(row["ties"]),
                low=low,
                high=high,
            )
        )
    return groups
