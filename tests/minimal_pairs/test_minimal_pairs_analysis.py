"""The minimal-pair analysis (evaluations/minimal_pairs/analysis.py): NLPScholar's own
results reproduced from its own predictions, and every other option checked against
values computed by hand. Pure Python: no database, no model."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from evaluations.minimal_pairs.analysis import (
    AnalysisError,
    AnalysisOptions,
    analyze_minimal_pairs,
    table_to_tsv,
)
from evaluations.minimal_pairs.tokens import TokenTable, parse_predictions_tsv, predictions_to_tsv
from suites.formats import minimal_pairs as mp
from tests.conftest import SHARED_DATA

NLPSCHOLAR = SHARED_DATA / "nlpscholar"


def _read_tsv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter="\t"))


def _same(ours: list[dict[str, str]], theirs: list[dict[str, str]]) -> None:
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs, strict=True):
        for column, value in ref.items():
            try:
                assert float(mine[column]) == pytest.approx(float(value), abs=1e-9), column
            except ValueError:
                assert mine[column] == value, column


def test_reproduces_nlpscholar_results_from_its_own_predictions() -> None:
    """sample_configs/minimal_pair_analyze.yaml: conditions `condition` (its `blah` is not
    a column), punctuation previous, pred_measure surp, word_summary mean."""
    pair_set = mp.load_minimal_pairs_file(
        str(NLPSCHOLAR / "data" / "minimal_pairs_bad.tsv"), drop_incomplete_pairs=True
    )
    tokens = parse_predictions_tsv(
        (NLPSCHOLAR / "predictions" / "minimal_pairs_bad.tsv").read_bytes()
    )
    options = AnalysisOptions(pred_measure="surp", word_summary="mean", punctuation="previous",
                              conditions=("condition",))  # fmt: skip
    result = analyze_minimal_pairs(tokens, pair_set, options)
    for table, name in ((result.by_cond, "minimal_pairs_bad.tsv"),
                        (result.by_pair, "minimal_pairs_bad_bypair.tsv")):  # fmt: skip
        assert table is not None
        theirs_text = (NLPSCHOLAR / "results" / name).read_text()
        theirs = _read_tsv(theirs_text)
        ours = _read_tsv(table_to_tsv(table))
        # NLPScholar's columns, in its order, then Gym's additions.
        their_columns = theirs_text.splitlines()[0].split("\t")
        assert ours and list(ours[0])[: len(their_columns)] == their_columns
        _same(ours, theirs)  # the index column ("") included: 0 1 6 7 8 9 for by_pair
    assert "7, 8, 9, 10" in result.warnings[0]


# Hand-computed cases. Sentence 1 "Hi, you ran." and 2 "Hi, you runs." form pair a.
# Words: Hi 0, "," 1, you 2, ran/runs 3, "." 4. Token surprisals (bits):
#   1: Hi 1 | , 2 | you 3 | r 4, an 2 | . 1
#   2: Hi 1 | , 2 | you 3 | runs 8    | . 1
def _tokens(model: str = "m", second: list[float] | None = None) -> TokenTable:
    rows = []
    one = [("Hi", 0, False, 1.0), (",", 1, True, 2.0), ("Ġyou", 2, False, 3.0),
           ("Ġr", 3, False, 4.0), ("an", 3, False, 2.0), (".", 4, True, 1.0)]  # fmt: skip
    two = [("Hi", 0, False, 1.0), (",", 1, True, 2.0), ("Ġyou", 2, False, 3.0),
           ("Ġruns", 3, False, 8.0), (".", 4, True, 1.0)]  # fmt: skip
    if second is not None:
        two = [(t, p, f, s) for (t, p, f, _), s in zip(two, second, strict=True)]
    for sentid, tokens in (("1", one), ("2", two)):
        for token, pos, punct, surp in tokens:
            rows.append(
                (token, sentid, token.lstrip("Ġ"), pos, model, "tok", punct, 2**-surp, surp)
            )
    return TokenTable.from_rows(rows)


def _pairs(roi: str = "", extra: str = "") -> mp.MinimalPairSet:
    return mp.parse_minimal_pairs(
        "sentid\tpairid\tcomparison\tsentence\tROI\tkind\n"
        f"1\ta\texpected\tHi, you ran.\t{roi}\tx_1{extra}\n"
        f"2\ta\tunexpected\tHi, you runs.\t{roi}\tx_1{extra}\n"
    )


def _pair_row(options: AnalysisOptions, **kwargs: Any) -> dict[str, Any]:
    result = analyze_minimal_pairs(_tokens(), _pairs(**kwargs), options)
    assert result.by_pair is not None
    return result.by_pair.as_dicts()[0]


@pytest.mark.parametrize(
    ("options", "expected", "unexpected"),
    [
        # previous: "," joins Hi, "." joins ran/runs; a word is the mean of its tokens.
        (AnalysisOptions(), (1.5 + 3 + 7 / 3) / 3, (1.5 + 3 + 4.5) / 3),
        (AnalysisOptions(word_summary="sum"), (3 + 3 + 7) / 3, (3 + 3 + 9) / 3),
        # separate: five words each.
        (AnalysisOptions(punctuation="separate"), (1 + 2 + 3 + 3 + 1) / 5, (1 + 2 + 3 + 8 + 1) / 5),
        # ignore: punctuation tokens left out (NLPScholar keeps them).
        (AnalysisOptions(punctuation="ignore"), (1 + 3 + 3) / 3, (1 + 3 + 8) / 3),
        # next: "," joins you; the final "." has no next word and joins ran/runs.
        (AnalysisOptions(punctuation="next"), (1 + 2.5 + 7 / 3) / 3, (1 + 2.5 + 4.5) / 3),
        (AnalysisOptions(pred_measure="perplexity"), 2 ** ((1.5 + 3 + 7 / 3) / 3), 2**3.0),
        (
            AnalysisOptions(pred_measure="prob"),
            ((2**-1 + 2**-2) / 2 + 2**-3 + (2**-4 + 2**-2 + 2**-1) / 3) / 3,
            ((2**-1 + 2**-2) / 2 + 2**-3 + (2**-8 + 2**-1) / 2) / 3,
        ),
    ],
)
def test_options_against_hand_computed_values(
    options: AnalysisOptions, expected: float, unexpected: float
) -> None:
    row = _pair_row(options)
    assert row["expected"] == pytest.approx(expected, abs=1e-12)
    assert row["unexpected"] == pytest.approx(unexpected, abs=1e-12)
    assert row["diff"] == pytest.approx(expected - unexpected, abs=1e-12)
    more_predictable = (
        expected > unexpected if options.pred_measure == "prob" else expected < unexpected
    )
    assert row["acc"] is more_predictable and row["tie"] is False


def test_roi_counts_words_after_punctuation_handling() -> None:
    # previous: words Hi, you, ran. -> ROI 1 is "you", ROI 2 is "ran." (r, an, .)
    assert _pair_row(AnalysisOptions(), roi="1")["expected"] == pytest.approx(3.0)
    assert _pair_row(AnalysisOptions(), roi="2")["expected"] == pytest.approx(7 / 3)
    assert _pair_row(AnalysisOptions(), roi="1,2")["unexpected"] == pytest.approx((3 + 4.5) / 2)
    # separate: ROI 1 is the comma.
    assert _pair_row(AnalysisOptions(punctuation="separate"), roi="1")["expected"] == pytest.approx(
        2.0
    )


def test_roi_beyond_the_words_of_the_chosen_handling_is_an_error() -> None:
    # 5 words with separate punctuation (valid data), 3 with previous.
    with pytest.raises(AnalysisError, match=r"row 2, column ROI: word position 4 does not exist"):
        _pair_row(AnalysisOptions(), roi="4")
    assert _pair_row(AnalysisOptions(punctuation="separate"), roi="4")["expected"] == pytest.approx(
        1.0
    )


def test_a_run_of_punctuation_folds_whole_and_leading_punctuation_joins_the_first_word() -> None:
    pair_set = mp.parse_minimal_pairs(
        "sentid\tpairid\tcomparison\tsentence\n1\ta\texpected\t(Go!?\n2\ta\tunexpected\tGo!\n"
    )
    rows = [
        ("(", "1", "(", 0, "m", "t", True, 0.5, 1.0), ("Go", "1", "Go", 1, "m", "t", False, 0.25, 2.0),
        ("!", "1", "!", 2, "m", "t", True, 0.5, 1.0), ("?", "1", "?", 3, "m", "t", True, 0.125, 3.0),
        ("Go", "2", "Go", 0, "m", "t", False, 0.25, 2.0), ("!", "2", "!", 1, "m", "t", True, 0.5, 1.0),
    ]  # fmt: skip
    for punctuation in ("previous", "next"):
        result = analyze_minimal_pairs(
            TokenTable.from_rows(rows), pair_set, AnalysisOptions(punctuation=punctuation)
        )
        assert result.by_word is not None and result.by_pair is not None
        words = [(r["sentid"], r["wordpos_mod"], r["word"]) for r in result.by_word.as_dicts()]
        assert words == [("1", 0, "(Go!?"), ("2", 0, "Go!")]
        pair = result.by_pair.as_dicts()[0]
        assert pair["expected"] == pytest.approx(7 / 4) and pair["unexpected"] == pytest.approx(1.5)


def test_ties_are_counted_and_shown_not_successes() -> None:
    # "runs" at 6 bits sums like "r" + "an" (4 + 2): with word_summary sum the sentences tie.
    same = [1.0, 2.0, 3.0, 6.0, 1.0]
    tokens = TokenTable.concat([_tokens("a", same), _tokens("b")])
    result = analyze_minimal_pairs(tokens, _pairs(), AnalysisOptions(word_summary="sum"))
    assert result.by_pair is not None and result.by_cond is not None
    tie_row, other = result.by_pair.as_dicts()
    assert (tie_row["model"], tie_row["acc"], tie_row["tie"], tie_row["diff"]) == (
        "a",
        False,
        True,
        0.0,
    )
    assert (other["model"], other["acc"], other["tie"]) == ("b", True, False)
    cond = result.by_cond.as_dicts()
    assert [(c["model"], c["acc"], c["pairs"], c["ties"]) for c in cond] == [
        ("a", 0.0, 1, 1),
        ("b", 1.0, 1, 0),
    ]


def test_by_cond_micro_and_macro_differences_and_condition_values_with_underscores() -> None:
    text = (
        "sentid\tpairid\tcomparison\tsentence\tgroup\tsub\n"
        "1\t1\texpected\tA.\tg_1\tx\n2\t1\tunexpected\tB.\tg_1\tx\n"
        "3\t2\texpected\tC.\tg_1\tx\n4\t2\tunexpected\tD.\tg_1\tx\n5\t2\texpected\tE.\tg_1\tx\n"
        "6\t3\texpected\tF.\th\tx\n7\t3\tunexpected\tG.\th\tx\n"
    )
    pair_set = mp.parse_minimal_pairs(text)
    surps = {"1": 1.0, "2": 4.0, "3": 2.0, "4": 1.0, "5": 6.0, "6": 5.0, "7": 5.0}
    rows = [(s[0], sid, s[0], 0, "m", "t", False, 2**-v, v)
            for sid, v in surps.items() for s in ["W"]]  # fmt: skip
    result = analyze_minimal_pairs(
        TokenTable.from_rows(rows), pair_set, AnalysisOptions(conditions=("group", "sub"))
    )
    assert result.by_pair is not None and result.by_cond is not None
    pairs = [(r["group"], r["pairid"], r["expected"], r["unexpected"], r["acc"], r["tie"])
             for r in result.by_pair.as_dicts()]  # fmt: skip
    # Pair 2 pools its two expected sentences: (2 + 6) / 2 = 4 against 1.
    assert pairs == [("g_1", "1", 1.0, 4.0, True, False), ("g_1", "2", 4.0, 1.0, False, False),
                     ("h", "3", 5.0, 5.0, False, True)]  # fmt: skip
    assert result.by_cond.columns == ["model", "group", "sub", "acc", "diff", "expected",
                                      "unexpected", "macrodiff", "pairs", "ties"]  # fmt: skip
    g1, h = result.by_cond.as_dicts()
    assert (g1["group"], g1["sub"], g1["acc"], g1["diff"]) == ("g_1", "x", 0.5, 0.0)
    assert (g1["expected"], g1["unexpected"], g1["macrodiff"]) == (2.5, 2.5, 0.0)
    assert (h["ties"], h["acc"]) == (1, 0.0)


def test_bad_options_and_missing_predictions_are_clear_errors() -> None:
    with pytest.raises(AnalysisError, match="pred_measure must be one of"):
        analyze_minimal_pairs(_tokens(), _pairs(), AnalysisOptions(pred_measure="logprob"))
    with pytest.raises(AnalysisError, match="'nope' is not a condition column"):
        analyze_minimal_pairs(_tokens(), _pairs(), AnalysisOptions(conditions=("nope",)))
    half = TokenTable.from_rows([("Hi", "1", "Hi", 0, "m", "t", False, 0.5, 1.0)])
    with pytest.raises(AnalysisError, match=r"no tokens for 1 paired sentences \(sentid 2\)"):
        analyze_minimal_pairs(half, _pairs(), AnalysisOptions())


def test_predictions_tsv_round_trip_and_errors() -> None:
    tokens = _tokens()
    again = parse_predictions_tsv(predictions_to_tsv(tokens))
    assert again.token == tokens.token and again.surp.tolist() == tokens.surp.tolist()
    assert again.punctuation.tolist() == tokens.punctuation.tolist()
    with pytest.raises(mp.MinimalPairFormatError) as caught:
        parse_predictions_tsv("token\tsentid\n")
    assert {e.column for e in caught.value.errors} >= {"word", "surp"}
    bad = predictions_to_tsv(tokens).replace("\tFalse\t", "\tmaybe\t", 1)
    with pytest.raises(mp.MinimalPairFormatError, match=r"row 2, column punctuation"):
        parse_predictions_tsv(bad)
