"""Reads of stored minimal-pair evaluations: the token table rebuilt from packed tokens
(Gym's words for scored tokens, the file's words for imported ones), the analysis
options of a query string, and the analysis of one evaluation."""

from __future__ import annotations

import math

import pytest

from evaluations import token_data
from evaluations.minimal_pairs import results as pair_results
from evaluations.models import LanguageModel, PairEvaluation, PairSentenceTokens
from suites.minimal_pairs import sets as pair_sets
from tests.minimal_pairs.conftest import DATA

pytestmark = pytest.mark.django_db


class Tok:
    def __init__(self, text: str, start: int, end: int, surprisal: float | None) -> None:
        self.text, self.start, self.end, self.surprisal = text, start, end, surprisal


# (sentid, tokens as (text, start, end, surprisal in bits)); "barks" is two tokens.
SCORED = [
    ("1", [("the", 0, 3, 1.0), ("Ġkeys", 3, 8, 2.0), ("Ġare", 8, 12, 3.0), ("Ġhere", 12, 17, 4.0)]),
    ("2", [("the", 0, 3, 1.0), ("Ġkeys", 3, 8, 2.0), ("Ġis", 8, 11, 5.0), ("Ġhere", 11, 16, 4.0)]),
    ("3", [("no", 0, 2, 2.0), ("Ġdog", 2, 6, 1.0), ("Ġbar", 6, 10, 1.0), ("ks", 10, 12, 3.0)]),
    ("4", [("a", 0, 1, 1.0), ("Ġdog", 1, 5, 1.0), ("Ġbar", 5, 9, 2.0), ("ks", 9, 11, 2.0)]),
]


def stored_evaluation(alice, packed_of, origin: str = "worker") -> PairEvaluation:
    pair_set = pair_sets.minimal_pair_set_import(data=DATA, name="small", owner=alice).pair_set
    model = LanguageModel.objects.create(name="tiny", display_name="tiny", source="tiny-src")
    evaluation = PairEvaluation.objects.create(
        model=model,
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        origin=origin,
        status=PairEvaluation.Status.DONE,
        model_info={"tokenizer": "tiny-tok"},
    )
    PairSentenceTokens.objects.bulk_create(
        PairSentenceTokens(evaluation=evaluation, position=i, sentid=sentid, tokens=packed_of(toks))
        for i, (sentid, toks) in enumerate(SCORED)
    )
    return evaluation


def scored(toks):
    return token_data.pack_tokens(Tok(*t) for t in toks)


def test_token_table_gives_gym_words_and_bits(alice) -> None:
    evaluation = stored_evaluation(alice, scored)
    table = pair_results.token_table(evaluation)
    assert len(table) == 16
    assert table.sentid[:5] == ["1", "1", "1", "1", "2"]
    # "ks" belongs to "barks" (its first non-space character is in that word).
    assert (table.token[11], table.word[11], int(table.wordpos[11])) == ("ks", "barks", 2)
    assert set(table.model) == {"tiny"} and set(table.tokenizer) == {"tiny-tok"}
    assert table.prob[2] == pytest.approx(2**-3.0) and table.surp[2] == 3.0
    assert not table.punctuation.any()


def test_analysis_of_a_stored_evaluation_under_options(alice) -> None:
    evaluation = stored_evaluation(alice, scored)
    analysis = pair_results.analyze_evaluation(evaluation, pair_results.DEFAULT_OPTIONS)
    assert analysis.by_pair is not None
    pairs = analysis.by_pair.as_dicts()
    # Pair 1: ROI word 2 ("are" 3 bits vs "is" 5 bits). Pair 2: whole sentence, the mean
    # of word means: (2 + 1 + 2) / 3 against (1 + 1 + 2) / 3.
    assert (pairs[0]["expected"], pairs[0]["unexpected"], pairs[0]["acc"]) == (3.0, 5.0, True)
    assert pairs[1]["expected"] == pytest.approx(5 / 3)
    assert pairs[1]["unexpected"] == pytest.approx(4 / 3) and pairs[1]["acc"] is False
    assert pair_results.accuracy_and_ties(analysis) == (0.5, 0)
    options = pair_results.analysis_options(
        {"word_summary": "sum", "conditions": "cond", "pred_measure": "prob"}
    )
    by_cond_table = pair_results.analyze_evaluation(evaluation, options).by_cond
    assert by_cond_table is not None
    by_cond = by_cond_table.as_dicts()
    assert [(r["cond"], r["acc"]) for r in by_cond] == [("agr", 1.0), ("npi", 0.0)]
    # A word's prob is its tokens' mean prob (as the analysis does for both summaries):
    # barks = (2**-1 + 2**-3) / 2 in sentence 3.
    assert by_cond[1]["expected"] == pytest.approx((2**-2 + 2**-1 + (2**-1 + 2**-3) / 2) / 3)


def test_imported_tokens_keep_their_own_words(alice) -> None:
    def as_imported(toks):
        return token_data.pack_word_tokens(
            [t[0] for t in toks],
            [t[3] for t in toks],
            ["w"] * len(toks),
            [0, 1, 1, 2],
            [False, False, True, False],
        )

    evaluation = stored_evaluation(alice, as_imported, origin="imported")
    table = pair_results.token_table(evaluation)
    assert table.word[:4] == ["w"] * 4 and table.wordpos[:4].tolist() == [0, 1, 1, 2]
    assert table.punctuation[:4].tolist() == [False, False, True, False]


def test_bad_options_are_located_400_errors(alice) -> None:
    assert pair_results.analysis_options({}) == pair_results.DEFAULT_OPTIONS
    assert pair_results.analysis_options({"punctuation": " "}).punctuation == "previous"
    for query, path in (
        ({"pred_measure": "logprob"}, "$.pred_measure"),
        ({"word_summary": "\x00max"}, "$.word_summary"),
        ({"punctuation": "x" * 5000}, "$.punctuation"),
    ):
        with pytest.raises(pair_results.PairAnalysisInvalid) as caught:
            pair_results.analysis_options(query)
        assert caught.value.status_code == 400
        assert caught.value.error_list()[0]["path"] == path
    evaluation = stored_evaluation(alice, scored)
    with pytest.raises(pair_results.PairAnalysisInvalid, match="not a condition column"):
        pair_results.analyze_evaluation(
            evaluation, pair_results.analysis_options({"conditions": "nope"})
        )
    table = pair_results.analyze_evaluation(evaluation).by_cond
    assert table is not None
    accuracy = table.rows[0][1]
    assert isinstance(accuracy, float) and not math.isnan(accuracy)
