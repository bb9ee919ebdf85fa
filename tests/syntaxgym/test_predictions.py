"""The prediction language (suites/formats/predictions.py): real formulas, evaluation, errors,
limits, and property tests that hostile text is only ever a PredictionError."""

from __future__ import annotations

import builtins
import decimal
import json
import math
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from suites.formats import predictions
from suites.formats.predictions import (
    APPROX_ABS_TOL,
    APPROX_REL_TOL,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NESTING,
    Abs,
    Arith,
    Compare,
    Logic,
    MissingValueError,
    Neg,
    Node,
    Not,
    Num,
    PredictionError,
    Ref,
    canonical,
    check_references,
    evaluate,
    parse,
    references,
    relation_to_formula,
    to_text,
)

SHARED_DATA = Path(
    os.environ.get(
        "GYM_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"
    )
)
SUITES_2020 = SHARED_DATA / "syntaxgym-2020"

A = Ref(1, "a")
B = Ref(1, "b")


def values(**by_condition: float | None) -> Callable[[int | None, str], float | None]:
    """A value lookup where region 1 of condition c is by_condition[c]; the whole
    sentence (region None) of c is 100 + that value, to tell the two apart."""

    def lookup(region: int | None, condition: str) -> float | None:
        value = by_condition[condition]
        if region is None and value is not None:
            return 100 + value
        return value

    return lookup


def holds(text: str, **by_condition: float | None) -> bool:
    return evaluate(parse(text), values(**by_condition))


# ---------------------------------------------------------------------------------------
# Every formula in the real 2020 suites


def _suite_files() -> list[Any]:
    master = SUITES_2020 / "master"
    if not master.is_dir():
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs the shared data at {master}")
        return [
            pytest.param(None, marks=pytest.mark.skip(reason=f"no SyntaxGym 2020 data at {master}"))
        ]
    return sorted(path.name for path in master.glob("*.json"))


def _regions_and_conditions(suite: dict[str, Any]) -> tuple[set[int], set[str]]:
    regions: set[int] = set()
    conditions: set[str] = set()
    for item in suite["items"]:
        for condition in item["conditions"]:
            conditions.add(condition["condition_name"])
            regions.update(region["region_number"] for region in condition["regions"])
    return regions, conditions


@pytest.mark.parametrize("file_name", _suite_files())
def test_real_formulas_parse_resolve_and_agree_across_branches(file_name: str) -> None:
    canonical_forms: dict[str, list[str]] = {}
    for branch in ("master", "nextflow"):
        suite = json.loads((SUITES_2020 / branch / file_name).read_text(encoding="utf-8"))
        regions, conditions = _regions_and_conditions(suite)
        forms = []
        for prediction in suite["predictions"]:
            node = parse(prediction["formula"])
            assert check_references(node, region_numbers=regions, condition_names=conditions) == []
            forms.append(to_text(node))
            # Canonical text is a fixed point.
            assert canonical(forms[-1]) == forms[-1]
        canonical_forms[branch] = forms
    assert canonical_forms["master"]
    assert canonical_forms["master"] == canonical_forms["nextflow"]


def test_real_master_formula_with_brackets() -> None:
    text = "[(6;%np_mismatch%)-(6;%np_match%)]+[[(5;%vp_mismatch%)+(6;%vp_mismatch%)]-[(5;%vp_match%)+(6;%vp_match%)]]>0"
    assert canonical(text) == (
        "(6;%np_mismatch%) - (6;%np_match%) + ((5;%vp_mismatch%) + (6;%vp_mismatch%)"
        " - ((5;%vp_match%) + (6;%vp_match%))) > 0"
    )


# ---------------------------------------------------------------------------------------
# Parsing, printing, references


def test_whitespace_inside_references() -> None:
    assert parse("( 5 ; %ambig_comma% ) > ( * ;%b%)") == Compare(
        ">", Ref(5, "ambig_comma"), Ref(None, "b")
    )


def test_references_carry_their_columns() -> None:
    text = "( 5 ; %ambig_comma% ) > (*;%b%) & ((5;%ambig_comma%) > (*;%b%))"
    first, second = references(parse(text))
    assert (first.region_col, first.condition_col) == (3, text.index("ambig") + 1)
    assert (second.region_col, second.condition_col) == (text.index("*") + 1, text.index("b%") + 1)
    # Columns are where a reference was written, not part of what it means.
    assert first == Ref(5, "ambig_comma") and len(references(parse(text))) == 2


def test_condition_names_allow_letters_digits_underscore_dash_dot() -> None:
    assert references(parse("(1;%no-obj_no-comma%) > (2;%v.1_X-2%)")) == [
        Ref(1, "no-obj_no-comma"),
        Ref(2, "v.1_X-2"),
    ]


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        # ~ binds looser than comparisons: not(a > b).
        ("~ (1;%a%) > (1;%b%)", Not(Compare(">", A, B))),
        # & binds tighter than |.
        (
            "(1;%a%) > 0 | (1;%b%) > 0 & (1;%a%) < 0",
            Logic(
                "|",
                Compare(">", A, Num(Decimal(0))),
                Logic("&", Compare(">", B, Num(Decimal(0))), Compare("<", A, Num(Decimal(0)))),
            ),
        ),
        # ~ binds tighter than &.
        (
            "~(1;%a%) > 0 & (1;%b%) > 0",
            Logic("&", Not(Compare(">", A, Num(Decimal(0)))), Compare(">", B, Num(Decimal(0)))),
        ),
        # Unary minus binds tighter than *, and * tighter than +.
        (
            "-(1;%a%) * 2 + 1 > 0",
            Compare(
                ">",
                Arith("+", Arith("*", Neg(A), Num(Decimal(2))), Num(Decimal(1))),
                Num(Decimal(0)),
            ),
        ),
        # Left grouping.
        (
            "1 - 2 - 3 = 0",
            Compare(
                "=",
                Arith("-", Arith("-", Num(Decimal(1)), Num(Decimal(2))), Num(Decimal(3))),
                Num(Decimal(0)),
            ),
        ),
        (
            "8 / 4 / 2 = 0",
            Compare(
                "=",
                Arith("/", Arith("/", Num(Decimal(8)), Num(Decimal(4))), Num(Decimal(2))),
                Num(Decimal(0)),
            ),
        ),
        # Brackets group like parentheses and nest.
        (
            "[[1 + 2] * 3] = 9",
            Compare(
                "=",
                Arith("*", Arith("+", Num(Decimal(1)), Num(Decimal(2))), Num(Decimal(3))),
                Num(Decimal(9)),
            ),
        ),
        ("abs(1;%a%) > abs((1;%b%))", Compare(">", Abs(A), Abs(B))),
        (
            "1 - -2 > .5",
            Compare(">", Arith("-", Num(Decimal(1)), Neg(Num(Decimal(2)))), Num(Decimal("0.5"))),
        ),
    ],
)
def test_precedence(text: str, tree: Node) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[(1;%a%)>(1;%b%)]&[(2;%a%)<(2;%b%)]", "(1;%a%) > (1;%b%) & (2;%a%) < (2;%b%)"),
        ("((1;%a%) + (1;%b%)) * 2 > 0", "((1;%a%) + (1;%b%)) * 2 > 0"),
        ("(1;%a%) - ((1;%b%) - 1) > 0", "(1;%a%) - ((1;%b%) - 1) > 0"),
        ("((1;%a%) - (1;%b%)) - 1 > 0", "(1;%a%) - (1;%b%) - 1 > 0"),
        ("~ (1;%a%) > 0", "~((1;%a%) > 0)"),
        ("~~((1;%a%) > 0)", "~~((1;%a%) > 0)"),
        ("(1;%a%) > 0 & ((1;%b%) > 0 & (1;%a%) > 1)", "(1;%a%) > 0 & ((1;%b%) > 0 & (1;%a%) > 1)"),
        ("abs(1;%a%) > 001.500", "abs((1;%a%)) > 1.5"),
        ("-(-(1;%a%)) > 100", "--(1;%a%) > 100"),
        ("(*;%a%) = 0.0", "(*;%a%) = 0"),
    ],
)
def test_canonical_form(text: str, expected: str) -> None:
    assert canonical(text) == expected
    assert canonical(expected) == expected


def test_references_in_order_without_duplicates() -> None:
    node = parse("(2;%b%) > (1;%a%) & (2;%b%) < (*;%a%) | (1;%a%) = 0")
    assert references(node) == [Ref(2, "b"), Ref(1, "a"), Ref(None, "a")]


def test_check_references_messages() -> None:
    node = parse("(7;%foo%) > (1;%that%) & (7;%that%) > (*;%waht%)")
    messages = check_references(
        node, region_numbers={1, 2, 3, 4, 5, 6}, condition_names={"that", "what"}
    )
    assert messages == [
        "region 7 does not exist (regions are 1-6)",
        "condition 'foo' does not exist (conditions: that, what)",
        "condition 'waht' does not exist (conditions: that, what); did you mean 'what'?",
    ]
    assert check_references(
        parse("(3;%a%) > 0"), region_numbers={1, 2, 5}, condition_names={"a"}
    ) == ["region 3 does not exist (regions are 1, 2, 5)"]
    assert check_references(parse("(*;%a%) > 0"), region_numbers=set(), condition_names={"a"}) == []


# ---------------------------------------------------------------------------------------
# Evaluation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(1;%a%) > (1;%b%)", True),
        ("(1;%a%) < (1;%b%)", False),
        ("(1;%a%) + (1;%b%) = 5", True),
        ("(1;%a%) - (1;%b%) = 1", True),
        ("(1;%b%) - (1;%a%) = -1", True),
        ("(1;%a%) * (1;%b%) = 6", True),
        ("(1;%a%) / (1;%b%) = 1.5", True),
        ("-(1;%a%) < 0", True),
        ("abs((1;%b%) - (1;%a%)) = 1", True),
        ("abs(1;%a%) = 3", True),
        ("~(1;%a%) > (1;%b%)", False),
        ("(1;%a%) > 0 & (1;%b%) > 2", False),
        ("(1;%a%) > 0 & (1;%b%) > 1", True),
        ("(1;%a%) > 5 | (1;%b%) > 1", True),
        ("(1;%a%) > 5 | (1;%b%) > 5", False),
        # Whole-sentence references get region None (the lookup adds 100 to tell).
        ("(*;%a%) = 103", True),
        ("(*;%a%) - (*;%b%) = (1;%a%) - (1;%b%)", True),
        # Precedence changes results: 2 + 3 * 2 = 8, not 10; -(3 - 2) vs -3 - 2.
        ("(1;%b%) + (1;%a%) * 2 = 8", True),
        ("-(1;%a%) - (1;%b%) = -5", True),
        ("~ (1;%a%) < 0 & (1;%b%) > 0", True),
    ],
)
def test_evaluate(text: str, expected: bool) -> None:
    assert holds(text, a=3.0, b=2.0) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (0.001, 0.0, True),  # |a - b| == 1e-3 exactly: the boundary counts as equal
        (0.0011, 0.0, False),
        (-0.001, 0.0, True),
        (1000.0105, 1000.0, True),  # tolerance 1e-3 + 1e-5 * 1000 = 0.011
        (1000.0115, 1000.0, False),
        (5.0, 5.0, True),
        (math.inf, math.inf, True),
        (1.0, math.inf, False),
        (math.inf, 1.0, False),
    ],
)
def test_approximate_equality_tolerance(a: float, b: float, expected: bool) -> None:
    assert APPROX_ABS_TOL == 1e-3 and APPROX_REL_TOL == 1e-5
    assert holds("(1;%a%) = (1;%b%)", a=a, b=b) is expected


def test_missing_and_nan_values_raise_missing_value_error() -> None:
    node = parse("(1;%a%) > (1;%b%)")
    with pytest.raises(MissingValueError) as missing:
        evaluate(node, values(a=None, b=1.0))
    assert missing.value.ref == A
    with pytest.raises(MissingValueError):
        evaluate(node, values(a=1.0, b=math.nan))
    with pytest.raises(MissingValueError):
        evaluate(parse("(1;%a%) - (1;%b%) > 0"), values(a=math.inf, b=math.inf))
    # No short-circuit: a missing value on the deciding side's partner still counts.
    with pytest.raises(MissingValueError):
        evaluate(parse("(1;%a%) < 0 & (1;%b%) > 0"), values(a=1.0, b=None))


def test_lookup_errors_and_division_by_zero_propagate() -> None:
    with pytest.raises(KeyError):
        evaluate(parse("(1;%zzz%) > 0"), values(a=1.0))
    with pytest.raises(ZeroDivisionError):
        evaluate(parse("(1;%a%) / (1;%b%) > 0"), values(a=1.0, b=0.0))


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("text", "col", "fragment"),
    [
        ("", 1, "empty"),
        ("   \n", 1, "empty"),
        ("((1;%a%) > 0", 13, "expected ')' to close the '(' at col 1"),
        ("[(1;%a%) > 0)", 13, "expected ']' to close the '[' at col 1, found ')'"),
        ("([1;%a%) > 0]", 4, "expected ']' to close the '[' at col 2, found ';'"),
        ("(1;%a%) <= 0", 9, "write ~(a > b)"),
        ("(1;%a%) >= 0", 9, "write ~(a < b)"),
        ("(1;%a%) == 0", 9, "single '='"),
        ("(1;%a%) != 0", 9, "write ~(a = b)"),
        ("(1;%a%) >", 10, "expected a value"),
        ("(1;%a%) > 0 &", 14, "expected a value"),
        ("(1;%a%) + > 0", 11, "expected a value"),
        ("(1;%a%) > 0 )", 13, "unmatched ')'"),
        ("(1;%a%) > 0 (1;%b%)", 13, "expected an operator"),
        ("(1;%a b%) > 0", 6, "in a condition name"),
        ("(1;%a) > 0", 6, "in a condition name"),
        ("(1;%a", 4, "missing its closing '%'"),
        ("(1;%%) > 0", 4, "empty condition name"),
        ("(1;a) > 0", 4, "unknown name 'a'"),
        ("(1;) > 0", 4, "expected a condition name"),
        ("(1;%a%; > 0", 7, "expected ')' to close the reference"),
        ("(1.5;%a%) > 0", 2, "whole number"),
        ("(0;%a%) > 0", 2, "numbered from 1"),
        ("(1;%a%) < (1;%b%) < (1;%c%)", 19, "comparisons do not chain; write (a < b) & (b < c)"),
        ("(1;%a%) < (1;%b%) > 0", 19, "comparisons do not chain"),
        ("((1;%a%) < (1;%b%)) < 0", 1, "comparisons do not chain"),
        ("(1;%a%) + 1", 1, "must be true or false"),
        ("5", 1, "must be true or false"),
        ("((1;%a%) > 0) + 1 > 0", 1, "'+' needs a number"),
        ("1 + ((1;%a%) > 0) > 0", 5, "'+' needs a number"),
        ("abs((1;%a%) > 0) > 0", 4, "abs(...) needs a number"),
        ("-((1;%a%) > 0) > 0", 2, "unary '-' needs a number"),
        ("(1;%a%) & (1;%b%) > 0", 1, "'&' (and) needs a true/false value"),
        ("(1;%a%) > 0 | 1", 15, "'|' (or) needs a true/false value"),
        ("~(1;%a%)", 2, "'~' (not) needs a true/false value"),
        ("(1;%a%) > 0 and (1;%b%) > 0", 13, "write '&'"),
        ("(1;%a%) > 1e", 12, "malformed exponent"),
        ("(1;%a%) > 2E+x", 12, "malformed exponent"),
        ("(1;%a%) > 1e-31", 11, "too long"),
        ("(1;%a%) > 1e999999", 11, "too long"),
        ("(1e0;%a%) > 0", 2, "whole number"),
        ("(1;%a%) > 1..5", 13, "malformed number"),
        ("(1;%a%) > 1.2.3", 14, "malformed number"),
        ("(1;%a%) > 12abc", 13, "right after the number"),
        ("abs 1 > 0", 5, "expected '(' after abs"),
        ("ABS(1;%a%) > 0", 1, "unknown name 'ABS'"),
        ("(1;%a%) ** 2 > 0", 9, "'**'"),
        ("(1;%a%) > 0 && (1;%b%) > 0", 13, "single '&'"),
        ("!((1;%a%) > 0)", 1, "write '~'"),
        ("(1;%a%) \u2212 1 > 0", 9, "U+2212 (MINUS SIGN); write '-'"),
        ("(1;%a%) \u2264 0", 9, "U+2264"),
        ("(1;%\u0430%) > 0", 5, "U+0430"),
        ("(1;%a%) > 0\x00", 12, "U+0000"),
        ("(1;%a%)\u00a0> 0", 8, "NO-BREAK SPACE"),
        ("__import__('os').system('x')", 1, "unknown name '__import__'"),
        ("a.b", 1, "unknown name 'a'"),
        ("lambda: 1", 1, "unknown name 'lambda'"),
        ("(1;%a%).real > 0", 8, "'.'"),
        ("(1;%a%) > 0; (1;%b%) > 0", 12, "expected an operator"),
    ],
)
def test_error_positions(text: str, col: int, fragment: str) -> None:
    with pytest.raises(PredictionError) as error:
        parse(text)
    assert (error.value.col, fragment in error.value.message) == (col, True), error.value
    assert str(error.value) == f"col {error.value.col}: {error.value.message}"


def test_prediction_error_is_a_value_error_and_pickles() -> None:
    error = PredictionError("expected ')'", 14)
    assert isinstance(error, ValueError)
    assert str(error) == "col 14: expected ')'"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.col, str(copy)) == (error.message, error.col, str(error))


@pytest.mark.parametrize(
    ("relation", "expected"),
    [
        ("greaterthan", "(3;%that%) > (3;%what%)"),
        ("GreaterThan", "(3;%that%) > (3;%what%)"),
        ("gt", "(3;%that%) > (3;%what%)"),
        ("lessthan", "(3;%that%) < (3;%what%)"),
        ("LT", "(3;%that%) < (3;%what%)"),
        ("equal", "(3;%that%) = (3;%what%)"),
        ("equals", "(3;%that%) = (3;%what%)"),
        ("eq", "(3;%that%) = (3;%what%)"),
    ],
)
def test_relation_to_formula(relation: str, expected: str) -> None:
    assert relation_to_formula(relation, 3, "that", "what") == expected


def test_relation_to_formula_errors() -> None:
    with pytest.raises(PredictionError) as error:
        relation_to_formula("morethan", 3, "that", "what")
    assert error.value.col == 1
    assert "greaterthan, lessthan, equal, equals, eq, gt, lt" in error.value.message
    with pytest.raises(PredictionError):
        relation_to_formula("gt", 0, "that", "what")
    with pytest.raises(PredictionError):
        relation_to_formula("gt", 3, "that%) > (1;%x", "what")


# ---------------------------------------------------------------------------------------
# Limits


@pytest.mark.parametrize(
    ("text", "col"),
    [
        ("(" * 100_000, MAX_LENGTH + 1),
        ("x" * 1_000_000, MAX_LENGTH + 1),
        ("(" * 10_000, MAX_NESTING + 1),
        ("[" * 10_000, MAX_NESTING + 1),
        ("9" * 10_000, 1),
        ("1e" + "9" * 48, 1),
        ("." + "1" * 9_000, 1),
        ("-" * 9_000 + "1 > 0", None),
        ("~" * 9_000 + "1 > 0", None),
        ("(1;%a%)" + " + (1;%a%)" * 500 + " > 0", None),
    ],
)
def test_limits_fail_fast(text: str, col: int | None) -> None:
    # Counted, not timed: the parser's work before it refuses must grow linearly with the
    # input (a quadratic path on these 10,000-character inputs makes ~10^8 calls).
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        with pytest.raises(PredictionError) as error:
            parse(text)
    finally:
        sys.setprofile(None)
    assert calls <= 50 * len(text) + 1_000
    if col is not None:
        assert error.value.col == col


def test_limits_allow_what_they_promise() -> None:
    nested = "(" * MAX_NESTING + "(1;%a%)" + ")" * MAX_NESTING + " > 0"
    assert parse(nested) == Compare(">", A, Num(Decimal(0)))
    assert parse("(1;%a%) > " + "9" * 30 + "." + "9" * 30)
    chain = "(1;%a%) > 0" + " & (1;%a%) > 0" * (MAX_DEPTH - 3)
    assert evaluate(parse(chain), values(a=1.0)) is True


def test_numbers_print_exactly_whatever_the_decimal_context() -> None:
    text = "(1;%a%) > " + "9" * 30 + "." + "9" * 29 + "1"
    with decimal.localcontext(decimal.Context(prec=5)):
        assert canonical(text) == text


def test_deepest_formula_fits_in_a_few_hundred_frames() -> None:
    # Callers (Django views, Celery tasks) may already be deep in the stack; the parser
    # must fit in a few hundred frames on top of them, not rely on the whole limit.
    text = "(" * MAX_NESTING + "-(1;%a%)" + ")" * MAX_NESTING + " > 0"
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 500)
    try:
        assert canonical(text) == "-(1;%a%) > 0"
    finally:
        sys.setrecursionlimit(old_limit)


# ---------------------------------------------------------------------------------------
# Properties

_names = st.from_regex(r"[A-Za-z0-9_.\-]{1,12}", fullmatch=True)
_refs = st.builds(Ref, st.one_of(st.none(), st.integers(1, 40)), _names)
_numbers = st.builds(
    Num,
    st.decimals(
        min_value=0, max_value=10**9, places=4, allow_nan=False, allow_infinity=False
    ).filter(lambda d: not d.is_signed()),
)
_numeric_trees = st.recursive(
    st.one_of(_refs, _numbers),
    lambda inner: st.one_of(
        st.builds(Neg, inner),
        st.builds(Abs, inner),
        st.builds(Arith, st.sampled_from("+-*/"), inner, inner),
    ),
    max_leaves=8,
)
_boolean_trees = st.recursive(
    st.builds(Compare, st.sampled_from("<>="), _numeric_trees, _numeric_trees),
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.builds(Logic, st.sampled_from("&|"), inner, inner),
    ),
    max_leaves=5,
)


def _height(node: Node) -> int:
    children = [getattr(node, name) for name in ("operand", "left", "right") if hasattr(node, name)]
    return 1 + max((_height(child) for child in children), default=0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_boolean_trees)
def test_printed_trees_parse_back_to_themselves(tree: Node) -> None:
    assume(_height(tree) <= MAX_DEPTH)
    text = to_text(tree)
    assert parse(text) == tree
    assert canonical(text) == text
    assert "[" not in text and "  " not in text


@settings(max_examples=100, deadline=None)
@given(_boolean_trees)
def test_brackets_and_spacing_do_not_change_the_tree(tree: Node) -> None:
    assume(_height(tree) < MAX_NESTING)
    # Doubled spaces, spaces inside references, newlines, and square brackets around the
    # whole formula: still the same tree.
    noisy = "[\n" + to_text(tree).replace(" ", "  ").replace(";", " ;\t") + " ]"
    assert parse(noisy) == tree


# Executed only if something ran a formula as Python.
SIDE_EFFECTS: list[str] = []

_HOSTILE = [
    "__import__('os').system('x')",
    "__import__('tests.syntaxgym.test_predictions').test_predictions.SIDE_EFFECTS.append(1)",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 0",
    "a.b",
    "1e999999",
    "9" * 40,
    "\x00",
    "\u2212",
    "\uff08",
    "\u0430",
    "\u00a0",
    "\ud800",
    "$(x)",
    "{}",
    "<=",
    "!=",
    "\\",
]
_ALPHABET = list("()[]+-*/<>=&|~;%.0123456789 abs_-\t\nxyz") + ["(1;%a%)", "(*;%b%)", "abs("]


@contextmanager
def _nothing_executes() -> Iterator[None]:
    """Any import, eval, exec or compile while parsing fails the test."""

    def forbidden(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"the parser tried to run code: {args[:1]!r}")

    saved = {name: getattr(builtins, name) for name in ("__import__", "eval", "exec", "compile")}
    for name in saved:
        setattr(builtins, name, forbidden)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(builtins, name, function)


def _parse_or_prediction_error(text: str) -> None:
    with _nothing_executes():
        try:
            node = parse(text)
        except PredictionError as error:
            assert 1 <= error.col <= len(text) + 1
            return
        printed = to_text(node)
    assert parse(printed) == node
    assert SIDE_EFFECTS == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_parses_or_raises_prediction_error(text: str) -> None:
    _parse_or_prediction_error(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET + _HOSTILE), max_size=40).map("".join))
def test_language_fragments_parse_or_raise_prediction_error(text: str) -> None:
    _parse_or_prediction_error(text)


@st.composite
def _mutated_formulas(draw: st.DrawFn) -> str:
    """A valid formula with up to three random insertions, deletions or overwrites, so
    that the parser is fed text close to valid, where the interesting errors live."""
    text = to_text(draw(_boolean_trees))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(_ALPHABET + _HOSTILE))
        action = draw(st.sampled_from(["insert", "delete", "overwrite"]))
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
    return text


@settings(max_examples=500, deadline=None)
@given(_mutated_formulas())
def test_mutated_formulas_parse_or_raise_prediction_error(text: str) -> None:
    _parse_or_prediction_error(text)


@pytest.mark.parametrize("text", _HOSTILE)
def test_hostile_fragments_are_parse_errors(text: str) -> None:
    with _nothing_executes(), pytest.raises(PredictionError):
        parse(text)
    with _nothing_executes(), pytest.raises(PredictionError):
        parse(f"(1;%a%) > {text}")
    assert SIDE_EFFECTS == []


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("1.5e1", "15"),
        (".5", "0.5"),
        ("2E-3", "0.002"),
        ("1.", "1"),
        ("1.e2", "100"),
        ("5e+0", "5"),
        ("1_000.25", "1000.25"),
        ("0x1F", "31"),
        ("0o17", "15"),
        ("0b101", "5"),
        ("1e-30", "0." + "0" * 29 + "1"),
        ("007.50", "7.5"),
    ],
)
def test_numbers_in_every_form_python_eval_accepted(literal: str, value: str) -> None:
    """SyntaxGym evaluated formulas with Python's eval, so real suites may write numbers
    in any of Python's forms; each means what Python meant, and prints canonically."""
    formula = f"(1;%a%) > {literal}"
    assert predictions.canonical(formula) == f"(1;%a%) > {value}"
    node = predictions.parse(formula)
    assert isinstance(node, Compare) and node.right == Num(Decimal(value))
    # The value is Python's own (float) reading of the literal, exactly where it is exact.
    expected = (
        float(literal.replace("_", ""))
        if literal[:2] not in ("0x", "0o", "0b")
        else int(literal, 0)
    )
    assert float(Decimal(value)) == pytest.approx(expected)
