"""The statistics the result pages, the comparison page and the leaderboard show: a 95%
interval for an accuracy, an exact paired test for two models on the same items, a
correction for testing many suites at once, and chance-corrected agreement between
people who labelled the same sentences (Cohen's and Fleiss' kappa). Exact and pure Python (no scipy, no Django):
the counts involved are at most a suite's items, small enough for exact binomial sums.
See docs/evaluation.md, "How sure the numbers are"."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# z for a two-sided 95% interval under a normal approximation.
Z95 = 1.96
# The level below which a (corrected) p-value counts as significant.
ALPHA = 0.05


def wilson_interval(successes: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a proportion (successes of n). Unlike the normal
    approximation it stays inside [0, 1] and does not collapse to zero width at 0 or n
    successes, which small suites and small conditions of a minimal-pair set often reach."""
    if n <= 0:
        return None
    share = successes / n
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At 0 or n successes one end is exactly the share; rounding must not leave it out.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def accuracy_counts(passed: Iterable[bool | None]) -> dict[str, Any]:
    """A suite's accuracy as counts with its 95% Wilson interval, from each item's outcome
    (None: not evaluable, left out as the accuracy leaves it out), laid out as the results
    JSON has it: `items_passed`, `items_evaluated` and `accuracy_interval` ([low, high],
    null without an evaluable item)."""
    outcomes = [p for p in passed if p is not None]
    passing = sum(1 for p in outcomes if p)
    interval = wilson_interval(passing, len(outcomes))
    return {
        "items_passed": passing,
        "items_evaluated": len(outcomes),
        "accuracy_interval": list(interval) if interval else None,
    }


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of two models on the same items: `b` items
    only the first passes, `c` only the second. Items both pass or both fail say nothing
    about which is better, so under "equally good" each of the b + c disagreements is a
    fair coin, and p is twice the binomial tail of the rarer side (at most 1). Summed in
    exact integers, so no rounding builds up however many items disagree."""
    if b < 0 or c < 0:
        raise ValueError("counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of several p-values, in the order given: the k-th
    smallest of m is multiplied by m - k + 1, each adjusted value is at least the one
    before it in sorted order, and none exceeds 1. Rejecting where the adjusted value is
    below alpha keeps the chance of any false "significant" at most alpha, with no
    assumption about how the tests depend on one another."""
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class PairedTest:
    """Two models on the same items: how many each passes that the other fails, and the
    exact McNemar p-value. Items either model cannot be judged on are left out."""

    only_first: int
    only_second: int
    both_pass: int
    both_fail: int

    @property
    def items(self) -> int:
        """The items both models could be judged on."""
        return self.only_first + self.only_second + self.both_pass + self.both_fail

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.only_first, self.only_second)

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    def counts(self, counted: str = "items") -> dict[str, int | float]:
        """The counts and the p-value as the APIs give them, `items` named `counted`."""
        return {
            counted: self.items,
            "only_first": self.only_first,
            "only_second": self.only_second,
            "both_pass": self.both_pass,
            "both_fail": self.both_fail,
            "p_value": self.p_value,
        }


def paired_test_data(test: PairedTest | None, *, counted: str = "items") -> dict[str, Any] | None:
    """A comparison's paired test as the APIs give it (None where there is none)."""
    if test is None:
        return None
    return {
        "method": "McNemar, exact, two-sided",
        **test.counts(counted),
        "significant": test.significant,
    }


def paired_test(pairs: Iterable[tuple[bool | None, bool | None]]) -> PairedTest:
    """The paired test of per-item outcomes (first model's, second model's); an item
    that either model has no outcome for (None: not evaluable) does not count."""
    counts = {(True, False): 0, (False, True): 0, (True, True): 0, (False, False): 0}
    for first, second in pairs:
        if first is None or second is None:
            continue
        counts[(bool(first), bool(second))] += 1
    return PairedTest(
        only_first=counts[(True, False)],
        only_second=counts[(False, True)],
        both_pass=counts[(True, True)],
        both_fail=counts[(False, False)],
    )


def paired_by_item(
    first: Mapping[int, bool | None], second: Mapping[int, bool | None]
) -> PairedTest:
    """The paired test of two evaluations given as item number -> passed, over the items
    both have."""
    return paired_test((first[n], second[n]) for n in first.keys() & second.keys())


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters who labelled the same items (first[i] and second[i]
    are their labels for item i): (p_o - p_e) / (1 - p_e), with p_o the share of items
    they agree on and p_e the agreement expected by chance from each rater's own label
    shares. 1 is perfect agreement, 0 no more than chance. None without items, or when
    chance alone predicts perfect agreement (both gave one and the same label
    throughout), where the ratio is 0 / 0."""
    if len(first) != len(second):
        raise ValueError("both raters must label the same items")
    n = len(first)
    if n == 0:
        return None
    observed = sum(1 for a, b in zip(first, second, strict=True) if a == b) / n
    shares_first = Counter(first)
    shares_second = Counter(second)
    expected = sum(shares_first[label] * shares_second[label] for label in shares_first) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def fleiss_kappa(items: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa of m >= 2 raters who each labelled every item: items[i] holds the m
    labels item i got. Per item, P_i is the share of the m(m-1) ordered pairs of raters
    who agree; P is their mean, P_e the sum of each label's squared share of all the
    labels given, and kappa = (P - P_e) / (1 - P_e). With two raters it is Scott's pi
    (chance from the pooled label shares), not Cohen's kappa. None without items, or
    when every label given is the same one (0 / 0)."""
    if not items:
        return None
    m = len(items[0])
    if m < 2 or any(len(labels) != m for labels in items):
        raise ValueError("every item needs the same number (at least 2) of labels")
    n = len(items)
    totals: Counter[Hashable] = Counter()
    agreement = 0.0
    for labels in items:
        counts = Counter(labels)
        totals.update(counts)
        agreement += (sum(c * c for c in counts.values()) - m) / (m * (m - 1))
    observed = agreement / n
    expected = sum((c / (n * m)) ** 2 for c in totals.values())
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def majority_rate(counts: dict[str, dict[str, int]]) -> float | None:
    """A probing task's chance: the te accuracy of always answering the label most
    frequent in tr (what a probe that learnt only the labels' prior scores)."""
    train, test = counts.get("tr") or {}, counts.get("te") or {}
    if not train or not sum(test.values()):
        return None
    majority = max(sorted(train), key=lambda label: train[label])
    return test.get(majority, 0) / sum(test.values())
