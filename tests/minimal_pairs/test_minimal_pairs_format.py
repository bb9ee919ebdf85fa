"""Minimal-pair sets (suites/formats/minimal_pairs.py): NLPScholar data TSVs and BLiMP
JSONL read into one form, every error located by row and column, export reads back
unchanged, and model-independent words. Pure Python: no database."""

from __future__ import annotations

import json
from typing import Any

import pytest

from suites.formats import minimal_pairs as mp
from tests.conftest import SHARED_DATA

NLPSCHOLAR = SHARED_DATA / "nlpscholar"


def _errors(text: str | bytes, **kwargs: Any) -> list[mp.PairSetError]:
    with pytest.raises(mp.MinimalPairFormatError) as caught:
        mp.parse_minimal_pairs(text, **kwargs)
    return caught.value.errors


def test_nlpscholar_sample_reads_with_its_columns_and_rois() -> None:
    pair_set = mp.load_minimal_pairs_file(str(NLPSCHOLAR / "data" / "minimal_pairs.tsv"))
    assert pair_set.source_format == mp.NLPSCHOLAR_TSV
    assert pair_set.columns == [
        "sentid", "pairid", "contextid", "lemma", "condition", "comparison", "sentence", "ROI"
    ]  # fmt: skip
    assert pair_set.condition_columns == ["contextid", "lemma", "condition"]
    first = pair_set.sentences[0]
    assert (first.sentid, first.pairid, first.comparison) == ("1", "1", "expected")
    assert first.sentence == "Hello, the student is the chameleon."  # CR stripped
    assert first.roi == (3, 4)
    assert first.conditions == {"contextid": "1", "lemma": "BE", "condition": "sing"}
    assert len(pair_set.pairs()) == 8


def test_incomplete_pairs_are_errors_or_dropped_with_a_warning() -> None:
    data = (NLPSCHOLAR / "data" / "minimal_pairs_bad.tsv").read_bytes()
    errors = _errors(data)
    assert [(e.row, e.column) for e in errors] == [(14, "comparison"), (15, "comparison"),
                                                    (16, "comparison"), (17, "comparison")]  # fmt: skip
    assert "pair '7' has no `unexpected` sentence" in errors[0].message
    kept = mp.parse_minimal_pairs(data, drop_incomplete_pairs=True)
    assert kept.dropped_pairs == ["7", "8", "9", "10"]
    assert "7, 8, 9, 10" in kept.warnings[0]


def test_bom_crlf_and_quoted_fields() -> None:
    text = (
        "\ufeffsentid\tpairid\tcomparison\tsentence\tnote\r\n"
        '1\tp\texpected\t"She said ""hi""\tthere."\t"a\tb"\r\n'
        '2\tp\tunexpected\tShe say hi.\t"x_y, z"\r\n'
    ).encode()
    pair_set = mp.parse_minimal_pairs(text)
    assert pair_set.columns[0] == "sentid"
    assert pair_set.sentences[0].sentence == 'She said "hi"\tthere.'
    assert pair_set.sentences[0].conditions == {"note": "a\tb"}
    assert pair_set.sentences[1].conditions == {"note": "x_y, z"}
    assert pair_set.sentences[0].roi is None


def test_pooling_several_sentences_of_one_label_is_allowed() -> None:
    text = "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\tA b.\n2\t1\texpected\tA c.\n3\t1\tunexpected\tA d.\n"
    pair_set = mp.parse_minimal_pairs(text)
    assert [s.comparison for s in pair_set.pairs()["1"]] == ["expected", "expected", "unexpected"]


def test_every_error_is_collected_with_row_and_column() -> None:
    text = (
        "sentid\tpairid\tcomparison\tsentence\tROI\n"
        "1\t1\texpected\tThe cat sleeps.\t1\n"
        "1\t1\tunexpected\tThe cat sleep.\t1\n"  # duplicate sentid
        "3\t2\tgood\tA dog barks.\t\n"  # bad label
        "4\t2\tunexpected\tA dog bark.\t4\n"  # ROI 4 does not exist (A dog bark . = 4 words)
        "5\t3\texpected\tHi.\tx\n"  # ROI not a number
        "6\t3\tunexpected\t\t\n"  # empty sentence
        "7\t4\texpected\tOnly one.\t\n"  # pair 4 lacks unexpected
        "8\t5\texpected\tToo\tmany\tfields\n"
    )
    errors = _errors(text)
    located = {(e.row, e.column) for e in errors}
    assert {(3, "sentid"), (4, "comparison"), (5, "ROI"), (6, "ROI"), (7, "sentence"),
            (9, None)} <= located  # fmt: skip
    for error in errors:
        assert error.path.startswith("row ")
    assert any("used again (first on row 2)" in e.message for e in errors)
    assert any("'good'; it must be `expected` or `unexpected`" in e.message for e in errors)
    assert any(
        "word position 4 does not exist: the sentence has 4 words" in e.message for e in errors
    )


def test_incomplete_pair_error_comes_once_the_rows_are_valid() -> None:
    errors = _errors("sentid\tpairid\tcomparison\tsentence\n7\t4\texpected\tOnly one.\n")
    assert [(e.row, e.column) for e in errors] == [(2, "comparison")]


@pytest.mark.parametrize(
    ("header", "column"),
    [
        ("pairid\tcomparison\tsentence", "sentid"),
        ("sentid\tpairid\tcomparison", "sentence"),
        ("sentid\tpairid\tsentence", "comparison"),
        ("sentid\tsentence\tsentence", "sentence"),
    ],
)
def test_header_problems(header: str, column: str) -> None:
    errors = _errors(header + "\n1\t2\t3\n")
    assert errors[0].row == 1 and errors[0].column == column


def test_no_pairs_is_a_valid_set_for_by_word() -> None:
    pair_set = mp.parse_minimal_pairs("sentid\tsentence\n1\tJust words.\n")
    assert not pair_set.has_pairs and pair_set.sentences[0].pairid is None


def test_blimp_jsonl() -> None:
    lines = [
        {"sentence_good": "Who did she see?", "sentence_bad": "Who did she see him?",
         "field": "syntax", "linguistics_term": "island_effects", "UID": "wh_x",
         "simple_LM_method": True, "pairID": "0"},
        {"sentence_good": "A b.", "sentence_bad": "A c.", "field": "morphology",
         "UID": "agr", "pairID": "1"},
    ]  # fmt: skip
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    pair_set = mp.parse_minimal_pairs(text, filename="x.jsonl")
    assert pair_set.source_format == mp.BLIMP_JSONL
    assert pair_set.columns == ["sentid", "pairid", "comparison", "sentence", "field",
                                "linguistics_term", "UID", "simple_LM_method"]  # fmt: skip
    first, second, third, _ = pair_set.sentences
    assert (first.sentid, first.pairid, first.comparison) == ("1", "0", "expected")
    assert (second.sentence, second.comparison) == ("Who did she see him?", "unexpected")
    assert first.conditions["simple_LM_method"] == "True"
    assert third.conditions == {"field": "morphology", "linguistics_term": "", "UID": "agr",
                                "simple_LM_method": ""}  # fmt: skip
    # Detected without the file name too.
    assert mp.parse_minimal_pairs(text).source_format == mp.BLIMP_JSONL


def test_blimp_errors_name_the_line_and_field() -> None:
    text = '{"sentence_good": "A.", "sentence_bad": "B.", "pairID": "1"}\nnot json\n[1]\n{"sentence_good": "C.", "pairID": "1"}\n'
    errors = _errors(text, filename="b.jsonl")
    assert [(e.row, e.column) for e in errors] == [
        (2, None),
        (3, None),
        (4, "sentence_bad"),
        (4, "pairID"),
    ]


def test_export_reads_back_unchanged() -> None:
    for name in ("minimal_pairs.tsv",):
        pair_set = mp.load_minimal_pairs_file(str(NLPSCHOLAR / "data" / name))
        text = mp.to_tsv_text(pair_set)
        again = mp.parse_minimal_pairs(text)
        assert again.sentences == [
            mp.PairSentence(**{**s.__dict__, "row": s.row}) for s in pair_set.sentences
        ]
        assert again.columns == pair_set.columns
        assert mp.content_hash(again) == mp.content_hash(pair_set)
    blimp = mp.parse_minimal_pairs('{"sentence_good": "A\\tb.", "sentence_bad": "C.", "k": "v"}\n')
    back = mp.parse_minimal_pairs(mp.to_tsv_text(blimp))
    assert [s.sentence for s in back.sentences] == ["A\tb.", "C."]
    assert back.sentences[0].conditions == {"k": "v"}


def test_words_split_off_leading_and_trailing_punctuation() -> None:
    words = mp.split_words('"Hello," she said... don\'t U.S. -- ok?!')
    assert [(w.text, w.punctuation) for w in words] == [
        ('"', True), ("Hello", False), (",", True), ('"', True), ("she", False),
        ("said", False), (".", True), (".", True), (".", True), ("don't", False),
        ("U.S", False), (".", True), ("-", True), ("-", True), ("ok", False), ("?", True),
        ("!", True),
    ]  # fmt: skip
    assert words[1].start == 1 and words[1].end == 6


def test_a_token_belongs_to_the_word_of_its_first_non_space_character() -> None:
    text = "Hello, the cat."
    words = mp.split_words(text)  # Hello , the cat .
    offsets = [(0, 5), (5, 6), (6, 10), (10, 14), (14, 15)]  # "Hello" "," " the" " cat" "."
    assert mp.word_of_tokens(words, offsets, text) == [0, 1, 2, 3, 4]
    # A token spanning a word and its punctuation goes to the word it starts in.
    assert mp.word_of_tokens(words, [(0, 6), (6, 15)], text) == [0, 2]
    # A token of spaces only goes with the word after it.
    assert mp.word_of_tokens(words, [(6, 7), (7, 10)], text) == [2, 2]
