"""The statistics of the result, comparison and leaderboard pages, checked against values
worked by hand (written out in each test) and against a plain recomputation from the
definitions, never against the implementation itself."""

from __future__ import annotations

import math

import pytest

from evaluations.statistics import (
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
