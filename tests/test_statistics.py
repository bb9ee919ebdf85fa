"""The statistics of the result, comparison and leaderboard pages, checked against values
worked by hand (written out in each test) and against a plain recomputation from the
definitions, never against the implementation itself."""

from __future__ import annotations

import math

import pytest

from evaluations.statistics import (
    cohen_kappa,
    fleiss_kappa,
    holm,
    mcnemar_exact,
    paired_by_item,
    paired_test,
    wilson_interval,
)


def test_wilson_interval_matches_values_worked_by_hand() -> None:
    # z = 1.96, z² = 3.8416. For 8 of 10: centre (0.8 + 0.19208) / 1.38416 = 0.71674,
    # half 1.96·√(0.016 + 0.009604) / 1.38416 = 0.22658: (0.4902, 0.9433).
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(2, 2) == pytest.approx((0.3424, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) is None


def test_wilson_interval_contains_the_share_and_narrows_with_more_items() -> None:
    for n in (1, 3, 10, 100):
        for k in range(n + 1):
            low, high = wilson_interval(k, n)  # type: ignore[misc]
            assert 0.0 <= low <= k / n <= high <= 1.0
    small = wilson_interval(8, 10)
    large = wilson_interval(80, 100)
    assert small and large and large[1] - large[0] < small[1] - small[0]


def test_mcnemar_exact_worked_by_hand() -> None:
    # b = 1, c = 9: 10 disagreements; P(X <= 1) = (C(10,0) + C(10,1)) / 2^10 = 11/1024,
    # doubled: 22/1024.
    assert mcnemar_exact(1, 9) == 0.021484375
    assert mcnemar_exact(9, 1) == 0.021484375
    # b = 0, c = 5: 2 · 1/32.
    assert mcnemar_exact(0, 5) == 0.0625
    # b = 2, c = 3: 2 · (1 + 5 + 10) / 32 = 1 exactly; b = c is never below 1 either.
    assert mcnemar_exact(2, 3) == 1.0
    assert mcnemar_exact(4, 4) == 1.0
    # No disagreement: nothing to tell the models apart.
    assert mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_mcnemar_exact_against_a_plain_binomial_sum() -> None:
    def by_definition(b: int, c: int) -> float:
        n = b + c
        if n == 0:
            return 1.0
        tail = sum(math.comb(n, i) * 0.5**n for i in range(min(b, c) + 1))
        return min(1.0, 2 * tail)

    for b in range(0, 30, 3):
        for c in range(0, 30, 4):
            assert mcnemar_exact(b, c) == pytest.approx(by_definition(b, c), rel=1e-12)
    # Thousands of disagreements stay exact and finite (no float overflow of 2**n).
    assert 0.0 <= mcnemar_exact(1500, 1700) < 0.05


def test_holm_worked_by_hand() -> None:
    # Sorted 0.01, 0.03, 0.04: times 3, 2, 1 -> 0.03, 0.06, 0.04; the last may not fall
    # below the one before it, so 0.06. Back in the order given:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # Capped at 1; a single test is left as it is; none is an empty list.
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([0.02]) == [0.02]
    assert holm([]) == []
    # Equal p-values: 0.01 · 4 for the first, then the others may not go below it.
    assert holm([0.01, 0.01, 0.01, 0.2]) == pytest.approx([0.04, 0.04, 0.04, 0.2])


def test_paired_counts_leave_out_items_without_an_outcome() -> None:
    test = paired_test(
        [(True, False), (True, False), (False, True), (True, True), (False, False), (None, True)]
    )
    assert (test.only_first, test.only_second, test.both_pass, test.both_fail) == (2, 1, 1, 1)
    assert test.items == 5
    # 3 disagreements, min 1: 2 · (1 + 3) / 8 = 1.
    assert test.p_value == 1.0 and not test.significant
    # Items only one evaluation has are left out.
    first = {1: True, 2: True, 3: True, 4: True, 5: True, 6: True, 7: False}
    second = {1: False, 2: False, 3: False, 4: False, 5: False, 6: False, 8: True}
    by_item = paired_by_item(first, second)
    assert (by_item.only_first, by_item.only_second, by_item.items) == (6, 0, 6)
    # 2 / 64.
    assert by_item.p_value == 0.03125 and by_item.significant


def _pairs(counts: dict[tuple[str, str], int]) -> tuple[list[str], list[str]]:
    first: list[str] = []
    second: list[str] = []
    for (a, b), k in counts.items():
        first += [a] * k
        second += [b] * k
    return first, second


def test_cohen_kappa_worked_by_hand() -> None:
    # 50 items: both yes 20, yes/no 5, no/yes 10, both no 15. p_o = 35/50 = 0.7; the first
    # says yes 25/50 = 0.5, the second 30/50 = 0.6, so p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5
    # and kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    first, second = _pairs({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15})
    assert cohen_kappa(first, second) == pytest.approx(0.4, abs=1e-12)
    # Three labels: A A B C against A B B C. p_o = 3/4; shares A .5/.25, B .25/.5,
    # C .25/.25: p_e = .125 + .125 + .0625 = .3125; kappa = .4375 / .6875 = 7/11.
    assert cohen_kappa("AABC", "ABBC") == pytest.approx(7 / 11, abs=1e-12)
    # Agreeing throughout is 1; opposite answers on a balanced pair is -1 (p_e = 1/2).
    assert cohen_kappa("ABAB", "ABAB") == 1.0
    assert cohen_kappa("AB", "BA") == -1.0
    # Undefined: no items, or both give one and the same label (0 / 0).
    assert cohen_kappa([], []) is None
    assert cohen_kappa("AAA", "AAA") is None
    # One constant rater and one who varies: p_e = 1/2, p_o = 1/2, kappa 0.
    assert cohen_kappa("AAAA", "AABB") == 0.0
    with pytest.raises(ValueError):
        cohen_kappa("AB", "A")


def test_fleiss_kappa_worked_by_hand() -> None:
    # Three raters, four items: AAA, AAB, BBB, ABB. Per item, the share of the 6 ordered
    # pairs that agree: 1, (2*1 + 0) / 6 = 1/3, 1, 1/3; P = 2/3. Labels: A 6 of 12, B 6 of
    # 12, P_e = 1/4 + 1/4 = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3.
    assert fleiss_kappa(["AAA", "AAB", "BBB", "ABB"]) == pytest.approx(1 / 3, abs=1e-12)
    # With two raters it is Scott's pi: the 50 items of the Cohen example, p_o = 0.7,
    # pooled yes share (25 + 30) / 100 = 0.55, P_e = 0.55^2 + 0.45^2 = 0.505,
    # pi = 0.195 / 0.495 = 13/33 (Cohen's 0.4 uses each rater's own shares).
    first, second = _pairs({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15})
    items = [pair for pair in zip(first, second, strict=True)]
    assert fleiss_kappa(items) == pytest.approx(13 / 33, abs=1e-12)
    # Fleiss' (1971) style example as Wikipedia works it: 10 items, 14 raters, 5
    # categories; P = 0.378, P_e = 0.213, kappa = 0.210.
    table = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]  # fmt: skip
    rated = [[c for c, k in enumerate(row) for _ in range(k)] for row in table]
    assert fleiss_kappa(rated) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa(["AAA", "BBB"]) == 1.0
    # Undefined: no items, or one label throughout; ragged or one-rater items are errors.
    assert fleiss_kappa([]) is None
    assert fleiss_kappa(["AAA", "AAA"]) is None
    with pytest.raises(ValueError):
        fleiss_kappa(["AAA", "AA"])
    with pytest.raises(ValueError):
        fleiss_kappa(["A", "B"])
