"""Every minimal-pair data set imports (suites/formats/pair_datasets.py): BLiMP and its
relatives, JBLiMP, MultiBLiMP, LM_syneval exports, CLAMS and Zorro, as JSON Lines,
Parquet, TSV or text lines, detected from the content or named; the paradigm field is
the first condition column; bad or ambiguous files are refused with where, what and how
to fix, and nothing saved. The samples are written here, small, by hand."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluations.minimal_pairs.result_page import default_conditions
from suites.formats import minimal_pairs as mp
from suites.formats import pair_datasets as pd
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, PairSetSentence
from tests.conftest import token_client


def _jsonl(*records: dict[str, object]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def _parquet(columns: dict[str, list[object]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


def _rows(pair_set: mp.MinimalPairSet) -> list[tuple[str, str | None, str | None, str, dict]]:
    return [
        (s.sentid, s.pairid, s.comparison, s.sentence, s.conditions) for s in pair_set.sentences
    ]


def _errors(data: str | bytes, **kwargs: Any) -> list[mp.PairSetError]:
    with pytest.raises(mp.MinimalPairFormatError) as caught:
        pd.read_pair_dataset(data, **kwargs)
    return caught.value.errors


# Samples, one a format, in the shape each data set is published in.
BLIMP = _jsonl(
    {"sentence_good": "Who had the girls helped?", "sentence_bad": "Who had the girls helped them?",
     "field": "syntax", "linguistics_term": "filler_gap", "UID": "wh_vs_that", "pairID": "0"},
    {"sentence_good": "What did Amy see?", "sentence_bad": "What did Amy see it?",
     "field": "syntax", "linguistics_term": "filler_gap", "UID": "wh_vs_that", "pairID": "1"},
)  # fmt: skip
SUPPLEMENT = _jsonl(
    {"sentence_good": "A dog is an animal.", "sentence_bad": "An animal is a dog."},
    {"sentence_good": "A rose is a flower.", "sentence_bad": "A flower is a rose."},
)
SLING = _jsonl(
    {"sentence_good": "他把书放在桌子上了。", "sentence_bad": "他把书放了在桌子上。",
     "phenomenon": "ba_construction", "paradigm": "ba_position"},
)  # fmt: skip
TURBLIMP = _jsonl(
    {"id": 7, "sentence_good": "Kedi süt içti.", "sentence_bad": "Kedi süt içtiler.",
     "phenomenon": "agreement"},
)  # fmt: skip
JBLIMP = _jsonl(
    {"ID": 11, "good_sentence": "太郎が本を読んだ。", "bad_sentence": "太郎が本を読んだを。",
     "type": "morphology", "phenomenon": "case particles"},
)  # fmt: skip
MULTIBLIMP = _jsonl(
    {"sen": "De hond blaft.", "verb": "blaft", "wrong_sen": "De hond blaffen.",
     "wrong_verb": "blaffen", "phenomenon": "SV-#", "lang": "nld", "verb_idx": 2},
    {"sen": "Het huis staat er.", "verb": "staat", "wrong_sen": "Het huis staan er.",
     "wrong_verb": "staan", "phenomenon": "SV-#", "lang": "nld", "verb_idx": 2},
)  # fmt: skip
LM_SYNEVAL = (
    b"case\tcondition\tgrammatical\tungrammatical\n"
    b"simple_agrmt\tsing\tthe author laughs .\tthe author laugh .\n"
    b"simple_agrmt\tplur\tthe authors laugh .\tthe authors laughs .\n"
)
CLAMS = (
    b"True\tthe author laughs .\n"
    b"False\tthe author laugh .\n"
    b"\n"
    b"True\tthe authors laugh .\n"
    b"False\tthe authors laughs .\n"
    b"False\tthe authors is laughing .\n"
)
ZORRO = (
    b"the dog on the boxes are brown .\n"
    b"the dog on the boxes is brown .\n"
    b"the dogs on the box is brown .\n"
    b"the dogs on the box are brown .\n"
)


def test_blimp_files_read_as_they_always_did() -> None:
    read = pd.read_pair_dataset(BLIMP, filename="wh_vs_that_with_gap.jsonl")
    assert read.source_format == "blimp-jsonl" == mp.BLIMP_JSONL
    assert read.condition_columns == ["field", "linguistics_term", "UID"]
    assert _rows(read)[:2] == [
        ("1", "0", "expected", "Who had the girls helped?",
         {"field": "syntax", "linguistics_term": "filler_gap", "UID": "wh_vs_that"}),
        ("2", "0", "unexpected", "Who had the girls helped them?",
         {"field": "syntax", "linguistics_term": "filler_gap", "UID": "wh_vs_that"}),
    ]  # fmt: skip
    old = mp.parse_minimal_pairs(BLIMP, filename="x.jsonl")
    assert mp.content_hash(read) == mp.content_hash(old)


def test_supplement_and_sling_without_fields_take_the_paradigm_from_the_file_name() -> None:
    read = pd.read_pair_dataset(SUPPLEMENT, filename="blimp_supplement/hypernym.jsonl")
    assert read.source_format == "blimp-jsonl"
    assert read.condition_columns == ["paradigm"]
    assert _rows(read) == [
        ("1", "1", "expected", "A dog is an animal.", {"paradigm": "hypernym"}),
        ("2", "1", "unexpected", "An animal is a dog.", {"paradigm": "hypernym"}),
        ("3", "2", "expected", "A rose is a flower.", {"paradigm": "hypernym"}),
        ("4", "2", "unexpected", "A flower is a rose.", {"paradigm": "hypernym"}),
    ]
    # Without a file name there is nothing to name the paradigm by.
    assert pd.read_pair_dataset(SUPPLEMENT).condition_columns == []


def test_blimp_relatives_put_their_paradigm_field_first() -> None:
    sling = pd.read_pair_dataset(SLING, filename="sling.jsonl")
    assert sling.condition_columns == ["paradigm", "phenomenon"]
    assert _rows(sling)[0] == (
        "1", "1", "expected", "他把书放在桌子上了。",
        {"paradigm": "ba_position", "phenomenon": "ba_construction"},
    )  # fmt: skip
    turblimp = pd.read_pair_dataset(TURBLIMP)
    assert turblimp.source_format == "blimp-jsonl"
    assert turblimp.condition_columns == ["phenomenon", "id"]
    assert _rows(turblimp)[1] == (
        "2", "1", "unexpected", "Kedi süt içtiler.", {"phenomenon": "agreement", "id": "7"}
    )  # fmt: skip


def test_jblimp_and_multiblimp() -> None:
    jblimp = pd.read_pair_dataset(JBLIMP)
    assert jblimp.source_format == "jblimp-jsonl"
    assert jblimp.condition_columns == ["phenomenon", "ID", "type"]
    assert _rows(jblimp) == [
        ("1", "1", "expected", "太郎が本を読んだ。",
         {"phenomenon": "case particles", "ID": "11", "type": "morphology"}),
        ("2", "1", "unexpected", "太郎が本を読んだを。",
         {"phenomenon": "case particles", "ID": "11", "type": "morphology"}),
    ]  # fmt: skip
    multi = pd.read_pair_dataset(MULTIBLIMP)
    assert multi.source_format == "multiblimp-jsonl"
    assert multi.condition_columns == ["lang", "verb", "wrong_verb", "phenomenon", "verb_idx"]
    assert [(s.pairid, s.comparison, s.sentence) for s in multi.sentences] == [
        ("1", "expected", "De hond blaft."),
        ("1", "unexpected", "De hond blaffen."),
        ("2", "expected", "Het huis staat er."),
        ("2", "unexpected", "Het huis staan er."),
    ]
    assert multi.sentences[0].conditions["verb_idx"] == "2"


def test_lm_syneval_export_one_test_case_a_row() -> None:
    read = pd.read_pair_dataset(LM_SYNEVAL, filename="syneval.tsv")
    assert read.source_format == "lm-syneval-tsv"
    assert read.condition_columns == ["case", "condition"]
    assert _rows(read) == [
        ("1", "2", "expected", "the author laughs .", {"case": "simple_agrmt", "condition": "sing"}),
        ("2", "2", "unexpected", "the author laugh .", {"case": "simple_agrmt", "condition": "sing"}),
        ("3", "3", "expected", "the authors laugh .", {"case": "simple_agrmt", "condition": "plur"}),
        ("4", "3", "unexpected", "the authors laughs .",
         {"case": "simple_agrmt", "condition": "plur"}),
    ]  # fmt: skip


def test_clams_pairs_each_false_line_with_the_true_line_before_it() -> None:
    read = pd.read_pair_dataset(CLAMS, filename="simple_agrmt.txt")
    assert read.source_format == "clams-tsv"
    assert read.condition_columns == ["paradigm"]
    paradigm = {"paradigm": "simple_agrmt"}
    assert _rows(read) == [
        ("1", "2", "expected", "the author laughs .", paradigm),
        ("2", "2", "unexpected", "the author laugh .", paradigm),
        ("3", "5", "expected", "the authors laugh .", paradigm),
        ("4", "5", "unexpected", "the authors laughs .", paradigm),
        ("5", "6", "expected", "the authors laugh .", paradigm),
        ("6", "6", "unexpected", "the authors is laughing .", paradigm),
    ]
    assert [s.row for s in read.sentences] == [1, 2, 4, 5, 4, 6]


def test_zorro_lines_alternate_ungrammatical_and_grammatical() -> None:
    read = pd.read_pair_dataset(
        ZORRO, filename="agreement_subject_verb-across_prepositional_phrase.txt"
    )
    assert read.source_format == "zorro-txt"
    paradigm = {"paradigm": "agreement_subject_verb-across_prepositional_phrase"}
    assert _rows(read) == [
        ("1", "1", "unexpected", "the dog on the boxes are brown .", paradigm),
        ("2", "1", "expected", "the dog on the boxes is brown .", paradigm),
        ("3", "2", "unexpected", "the dogs on the box is brown .", paradigm),
        ("4", "2", "expected", "the dogs on the box are brown .", paradigm),
    ]


def test_hugging_face_exports_as_json_lines_and_parquet_read_alike() -> None:
    records = [json.loads(line) for line in MULTIBLIMP.decode().splitlines()]
    columns = {key: [r[key] for r in records] for key in records[0]}
    from_parquet = pd.read_pair_dataset(_parquet(columns), filename="nld.parquet")
    assert from_parquet.source_format == "multiblimp-parquet"
    from_jsonl = pd.read_pair_dataset(MULTIBLIMP)
    assert _rows(from_parquet) == _rows(from_jsonl)
    assert mp.content_hash(from_parquet) == mp.content_hash(from_jsonl)
    # pandas' index column is not data; nested values are kept as JSON text.
    blimp = pd.read_pair_dataset(
        _parquet(
            {
                "sentence_good": ["Cats sleep."],
                "sentence_bad": ["Cats sleeps."],
                "UID": ["agr"],
                "tags": [["a", "b"]],
                "__index_level_0__": [0],
            }
        )
    )
    assert blimp.source_format == "blimp-parquet"
    assert blimp.sentences[0].conditions == {"UID": "agr", "tags": '["a", "b"]'}


def test_the_format_can_be_named_and_names_are_checked() -> None:
    # A file of sentence_good / sentence_bad lines named as what it is, or as its record.
    assert pd.read_pair_dataset(SUPPLEMENT, file_format="blimp").pairs().keys() == {"1", "2"}
    assert pd.read_pair_dataset(MULTIBLIMP, file_format="multiblimp-jsonl").source_format == (
        "multiblimp-jsonl"
    )
    # Named, a file is read as that format even where detection would choose another.
    zorro = pd.read_pair_dataset(b"True\tA b.\nFalse\tA c.\n", file_format="zorro")
    assert [(s.comparison, s.sentence) for s in zorro.sentences] == [
        ("unexpected", "True\tA b."),
        ("expected", "False\tA c."),
    ]
    (unknown,) = _errors(CLAMS, file_format="blimp2")
    assert unknown.column == "file_format"
    assert unknown.message == (
        "unknown format 'blimp2'; leave it empty to detect the format from the content, or "
        "name one of: nlpscholar, blimp, jblimp, multiblimp, lm-syneval, clams, zorro, lm-eval"
    )
    (wrong,) = _errors(JBLIMP, file_format="multiblimp")[:1]
    assert (wrong.row, wrong.column) == (1, "sen")
    assert "`sen` is missing (the line has `ID`, `good_sentence`, `bad_sentence`" in wrong.message
    assert wrong.message.endswith(f"choose it {pd.HOW_TO_CHOOSE}")


def test_ambiguous_content_says_what_it_saw_and_how_to_choose() -> None:
    both = _jsonl({"sentence_good": "A.", "sentence_bad": "B.", "sen": "C.", "wrong_sen": "D."})
    (error,) = _errors(both)
    assert error.row == 1
    assert error.message == (
        "line 1 holds the sentence fields of more than one format: "
        "`sentence_good`/`sentence_bad` (blimp); `sen`/`wrong_sen` (multiblimp); choose the "
        "format (the upload page's Format, the API's `file_format`, the command's "
        "`--file-format`)"
    )
    assert pd.read_pair_dataset(both, file_format="multiblimp").sentences[0].sentence == "C."
    header = b"sentid\tsentence\tgrammatical\tungrammatical\n1\tA b.\tA b.\tA c.\n"
    (error,) = _errors(header)
    assert "could be the header of an NLPScholar TSV" in error.message
    assert error.message.endswith(f"choose the format nlpscholar or lm-syneval {pd.HOW_TO_CHOOSE}")
    read = pd.read_pair_dataset(header, file_format="nlpscholar")
    assert (read.source_format, read.condition_columns) == (
        "nlpscholar-tsv",
        ["grammatical", "ungrammatical"],
    )
    # As an LM_syneval export, its `sentid` and `sentence` columns would be conditions.
    assert [(e.column, e.message) for e in _errors(header, file_format="lm-syneval")] == [
        (name, f"`{name}` is a name Gym keeps for its own columns; rename the field (it would "
               "be a condition column)")
        for name in ("sentid", "sentence")
    ]  # fmt: skip
    (error,) = _errors(_jsonl({"good": "A.", "bad": "B."}))
    assert error.message.startswith(
        "line 1 has the fields `good`, `bad`, but no pair of sentence fields Gym knows: "
        "`sentence_good`/`sentence_bad` (BLiMP, BLiMP supplement, SLING, TurBLiMP, BLiMP-NL)"
    )
    assert error.message.endswith(
        f"Rename the two sentence fields, or choose the format {pd.HOW_TO_CHOOSE}"
    )


@pytest.mark.parametrize(
    ("data", "kwargs", "where", "message"),
    [
        (_jsonl({"sentence_good": "A.", "sentence_bad": 3}), {}, (1, "sentence_bad"),
         "`sentence_bad` is the number 3, not text; it must hold the sentence as a string"),
        (_jsonl({"sen": "A.", "wrong_sen": "B."}, {"sen": "C."}), {}, (2, "wrong_sen"),
         "`wrong_sen` is missing (the line has `sen`); every line of a multiblimp file needs "
         "`sen` and `wrong_sen`. If the file is another format, choose it (the upload "
         "page's Format, the API's `file_format`, the command's `--file-format`)"),
        (b'{"sen": "A.", "wrong_sen": "B."}\n{"sen": "C.",\n', {}, (2, None),
         "not valid JSON: Expecting property name enclosed in double quotes at column 14"),
        (b"True\tA b.\nMaybe\tA c.\n", {}, (2, None),
         "a CLAMS line is `True` or `False`, a tab, then the sentence; this line has 2 "
         "tab-separated fields starting 'Maybe'"),
        (b"False\tA c.\nTrue\tA b.\n", {"file_format": "clams"}, (1, None),
         "an ungrammatical (`False`) sentence before any grammatical (`True`) one; each test "
         "case starts with its `True` line"),
        (b"True\tA b.\nFalse\tA c.\nTrue\tA d.\n", {}, (3, "comparison"),
         "pair '3' has no `unexpected` sentence; every pair needs at least one expected and "
         "one unexpected sentence (add it, or ask to leave incomplete pairs out)"),
        (b"a b c .\na b d .\na b e .\n", {}, (3, None),
         "the file has 3 sentences: Zorro files hold an ungrammatical and a grammatical line "
         "in turn, so the last one has no grammatical partner; add it, or ask to leave "
         "incomplete pairs out"),
        (b"case\tgrammatical\tungrammatical\nx\tA b.\n", {}, (2, None),
         "2 fields where the header has 3; a tab inside a cell needs the cell in double quotes"),
        (_jsonl({"sentence_good": "A.", "sentence_bad": " ", "sentence": "x"}), {},
         (None, "sentence"),
         "`sentence` is a name Gym keeps for its own columns; rename the field (it would be a "
         "condition column)"),
        (b"[{\"sen\": \"A.\"}]", {}, (None, None),
         "the file is one JSON array; Gym reads JSON Lines, one object (one pair) a line. "
         "Hugging Face datasets writes them with `Dataset.to_json(path)`, pandas with "
         "`to_json(path, orient='records', lines=True)`"),
        (b"just text", {"filename": "x.parquet"}, (None, None),
         "the file's name ends in .parquet, but it does not start as a Parquet file does (the "
         "bytes PAR1); upload the .parquet file itself"),
        (b"\n  \n", {}, (None, None), "the file is empty"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_with_where_what_and_how(
    data: bytes, kwargs: dict[str, str], where: tuple[int | None, str | None], message: str
) -> None:
    error = _errors(data, **kwargs)[0]
    assert ((error.row, error.column), error.message) == (where, message)


def test_broken_parquet_is_refused_and_a_parquet_file_is_not_read_as_text() -> None:
    whole = _parquet({"sen": ["A."], "wrong_sen": ["B."]})
    (error,) = _errors(whole[:60] + b"\x00" * 8 + whole[-8:])
    assert error.message.startswith("cannot read the Parquet file: ")
    assert error.message.endswith(
        "write it again (e.g. `Dataset.to_parquet(path)`), or upload the data set as JSON Lines"
    )
    (error,) = _errors(whole, file_format="zorro")
    assert error.message == (
        "the file is Parquet, but the format zorro is text; choose a format whose records "
        "hold two sentences: blimp, jblimp, multiblimp, lm-syneval"
    )


def test_incomplete_pairs_may_be_left_out_on_request() -> None:
    read = pd.read_pair_dataset(ZORRO + b"one more .\n", drop_incomplete_pairs=True)
    assert read.dropped_pairs == ["3"]
    assert read.warnings == [
        "pairs left out because they lack an expected or an unexpected sentence: 3"
    ]


# ---------------------------------------------------------------- on the site


@pytest.mark.django_db
def test_api_page_and_command_import_each_format(alice, alice_client, tmp_path) -> None:
    client = token_client(alice)
    for name, data, filename, shown in (
        ("api-jblimp", JBLIMP, "jblimp.jsonl", "jblimp-jsonl"),
        ("api-clams", CLAMS, "simple_agrmt.txt", "clams-tsv"),
        ("api-multi", _parquet({"sen": ["A b."], "wrong_sen": ["A c."], "lang": ["nld"]}),
         "nld.parquet", "multiblimp-parquet"),
    ):  # fmt: skip
        response = client.post(
            f"/api/minimal-pairs/?name={name}&filename={filename}",
            data,
            content_type="application/octet-stream",
        )
        assert response.status_code == 201, response.content
        assert response.json()["source_format"] == shown
    multi = MinimalPairSet.objects.get(name="api-multi")
    assert multi.condition_columns == ["lang"] and default_conditions(multi) == ("lang",)
    clams = MinimalPairSet.objects.get(name="api-clams")
    assert (clams.pair_count, clams.sentence_count) == (3, 6)
    assert default_conditions(clams) == ("paradigm",)

    # Named in the multipart form, and refused with the field when unknown.
    named = client.post(
        "/api/minimal-pairs/",
        {
            "file": SimpleUploadedFile("x.jsonl", SUPPLEMENT),
            "name": "named",
            "file_format": "blimp",
        },
    )
    assert named.status_code == 201 and named.json()["condition_columns"] == ["paradigm"]
    bad = client.post(
        "/api/minimal-pairs/?name=bad&file_format=blimp2", ZORRO, content_type="text/plain"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.file_format"
    ambiguous = client.post(
        "/api/minimal-pairs/?name=bad",
        _jsonl({"sentence_good": "A.", "sentence_bad": "B.", "sen": "C.", "wrong_sen": "D."}),
        content_type="text/plain",
    )
    assert ambiguous.status_code == 400
    assert "more than one format" in ambiguous.json()["errors"][0]["message"]
    broken = client.post(
        "/api/minimal-pairs/?name=bad", b"PAR1\x00\x01PAR1", content_type="text/plain"
    )
    assert broken.status_code == 400
    assert broken.json()["errors"][0]["message"].startswith("cannot read the Parquet file")

    # The upload page has the choice; a bad file saves nothing and says where.
    page = alice_client.get("/minimal-pairs/upload/").content.decode()
    assert (
        '<option value="zorro">Zorro (ungrammatical and grammatical lines in turn)</option>' in page
    )
    upload = SimpleUploadedFile("agreement.txt", ZORRO)
    response = alice_client.post_form(
        "/minimal-pairs/upload/", {"file": upload, "name": "zorro", "file_format": "zorro"}
    )
    assert response.status_code == 302
    zorro = MinimalPairSet.objects.get(name="zorro")
    assert (zorro.source_format, zorro.condition_columns) == ("zorro-txt", ["paradigm"])
    assert zorro.sentences.get(sentid="2").conditions == {"paradigm": "agreement"}
    odd = SimpleUploadedFile("odd.txt", ZORRO + b"one more .\n")
    response = alice_client.post_form("/minimal-pairs/upload/", {"file": odd, "name": "odd"})
    assert response.status_code == 400
    assert "row 5</code> the file has 5 sentences: Zorro files" in response.content.decode()

    # The command: a folder of text and Parquet files, each detected, or one named.
    (tmp_path / "simple_agrmt.txt").write_bytes(CLAMS)
    (tmp_path / "syneval.tsv").write_bytes(LM_SYNEVAL)
    (tmp_path / "nld.parquet").write_bytes(_parquet({"sen": ["X y."], "wrong_sen": ["X z."]}))
    out = io.StringIO()
    call_command("import_minimal_pairs", str(tmp_path), stdout=out)
    assert out.getvalue().splitlines() == [
        f"{tmp_path / 'nld.parquet'}: imported 'nld' (1 pairs, 2 sentences, multiblimp-parquet)",
        f"{tmp_path / 'simple_agrmt.txt'}: imported 'simple_agrmt' (3 pairs, 6 sentences, "
        "clams-tsv)",
        f"{tmp_path / 'syneval.tsv'}: imported 'syneval' (2 pairs, 4 sentences, lm-syneval-tsv)",
    ]
    odd_file = tmp_path / "odd.txt"
    odd_file.write_bytes(ZORRO + b"one more .\n")
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 of 1 file"):
        call_command("import_minimal_pairs", str(odd_file), "--format", "zorro", stdout=out)
    assert "row 5: the file has 5 sentences" in out.getvalue()
    assert not MinimalPairSet.objects.filter(name="odd").exists()
    count = PairSetSentence.objects.count()
    assert count == sum(s.sentence_count for s in MinimalPairSet.objects.all())


@pytest.mark.django_db
def test_replace_takes_a_named_format(alice) -> None:
    stored = pair_sets.minimal_pair_set_import(data=SUPPLEMENT, name="s", owner=alice).pair_set
    assert stored.source_format == "blimp-jsonl"
    report = pair_sets.minimal_pair_set_replace(
        pair_set=stored, user=alice, data=ZORRO, filename="agr.txt", file_format="zorro"
    )
    assert report.changed and report.source_format == "zorro-txt"
    stored.refresh_from_db()
    assert (stored.pair_count, stored.condition_columns) == (2, ["paradigm"])
    with pytest.raises(pair_sets.PairSetInvalid, match="`sen` is missing"):
        pair_sets.minimal_pair_set_replace(
            pair_set=stored, user=alice, data=JBLIMP, file_format="multiblimp"
        )
    stored.refresh_from_db()
    assert stored.source_format == "zorro-txt" and stored.sentences.count() == 4
