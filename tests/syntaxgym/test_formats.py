"""The format layer (suites/formats): every SyntaxGym version found in the wild reads into
one canonical suite, bad input gets errors that say where and how to fix, and JSON and
CSV exports read back unchanged. Pure Python: no database, no Django."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import string
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suites import formats
from suites.formats import FormatResult, Location, SuiteError, predictions

DATA = Path(
    os.environ.get(
        "GYM_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"
    )
)
NO_DATA = f"the real SyntaxGym files are not at {DATA} (a checkout without ../shared/data)"
MASTER = DATA / "syntaxgym-2020" / "master"
NEXTFLOW = DATA / "syntaxgym-2020" / "nextflow"
MISC = DATA / "syntaxgym-misc"

# Files whose regions carry stray spaces (see shared/data/syntaxgym-2020/SOURCE.md).
STRAY_SPACES = {
    "npz_ambig.json",
    "npz_ambig_mod.json",
    "npz_obj.json",
    "npz_obj_mod.json",
    "fgd-embed3.json",
    "fgd-embed4.json",
    "subordination_pp-pp.json",
}
STRAY_NOTE = "leading/trailing spaces"
NO_PREDICTIONS_NOTE = "no predictions"


def _suite_files() -> list[Path]:
    """Every suite in shared/data; the JSON Schema that lives there is not a suite."""
    if not DATA.is_dir():
        return []
    return sorted(
        p for p in DATA.rglob("*.json") if "$schema" not in json.loads(p.read_text("utf-8"))
    )


def _file_params() -> list[Any]:
    files = _suite_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_DATA), id="no-data")]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in files]


@cache
def _load(path: Path) -> FormatResult:
    return formats.load_suite_file(path)


def _suite(path: Path) -> dict[str, Any]:
    result = _load(path)
    assert result.suite is not None, result.errors
    return result.suite


def _expected_format(path: Path) -> str:
    name = path.name
    if path.parent.name == "master":
        # nn-nv-rpl's formulas have no brackets to rewrite.
        return formats.CURRENT if name == "nn-nv-rpl.json" else formats.BRACKET_FORMULAS
    if path.parent.name == "nextflow":
        return formats.CURRENT
    if name.endswith(".RESULTS.json"):
        return formats.RESULTS
    if name == "syntaxgym-core__data__test_in@9af99b6.json":
        return formats.NO_PREDICTIONS
    if name in (
        "syntaxgym-core__data__test__test_in.json",
        "syntaxgym-core__data__test-unk__in.json",
    ):
        return formats.RELATIONS_2019
    return formats.CURRENT


def _notes_about(result: FormatResult, text: str) -> list[str]:
    return [w for w in result.warnings if text in w]


# -- the real files ------------------------------------------------------------------------


@pytest.mark.parametrize("path", _file_params())
def test_real_file_imports_with_expected_format_and_notes(path: Path) -> None:
    result = _load(path)
    assert result.ok, result.errors
    assert result.source_format == _expected_format(path)
    suite = result.suite
    assert suite is not None
    assert list(suite) == ["meta", "region_meta", "predictions", "items"]

    stray = _notes_about(result, STRAY_NOTE)
    if path.parent.name == "master" and path.name in STRAY_SPACES:
        assert stray
    else:
        assert not stray
    no_predictions = _notes_about(result, NO_PREDICTIONS_NOTE)
    assert bool(no_predictions) == (
        result.source_format in (formats.NO_PREDICTIONS, formats.RESULTS)
    )
    if result.source_format == formats.RESULTS:
        (note,) = _notes_about(result, "results file")
        assert "metric_value" in note and "meta.model" in note
        assert "model" not in suite["meta"]
    if result.source_format == formats.RELATIONS_2019:
        assert suite["predictions"] == [{"type": "formula", "formula": "(3;%that%) > (3;%what%)"}]
        assert json.loads(result.original_predictions[0]) == {
            "relation": "greaterthan",
            "region_number": 3,
            "l_operand": "that",
            "r_operand": "what",
        }
        assert _notes_about(result, "2019 relation")
    # Nothing else to say about these files: no unknown keys, no renamed tags.
    for warning in result.warnings:
        assert any(
            key in warning
            for key in (
                STRAY_NOTE,
                "  item ",
                "  … and",
                NO_PREDICTIONS_NOTE,
                "results file",
                "2019 relation",
                "square-bracket",
            )
        ), warning

    # Canonical: contents stripped, regions in order, conditions in the first item's order.
    order = formats.condition_names(suite)
    for item in suite["items"]:
        assert [c["condition_name"] for c in item["conditions"]] == order
        for condition in item["conditions"]:
            numbers = [r["region_number"] for r in condition["regions"]]
            assert numbers == list(range(1, len(suite["region_meta"]) + 1))
            assert all(r["content"] == r["content"].strip() for r in condition["regions"])


@pytest.mark.parametrize("path", _file_params())
def test_real_file_round_trips(path: Path) -> None:
    result = _load(path)
    assert result.ok, result.errors
    assert result.suite is not None
    text = formats.to_json_text(result.suite)
    again = formats.parse_suite_text(text)
    assert again.ok, again.errors
    assert again.suite == result.suite
    assert again.source_format in (formats.CURRENT, formats.NO_PREDICTIONS)
    # The only note left after a round trip: a suite without predictions still has none.
    assert all(NO_PREDICTIONS_NOTE in w for w in again.warnings), again.warnings
    assert again.suite is not None
    assert formats.to_json_text(again.suite) == text
    assert again.original_predictions == [p["formula"] for p in result.suite["predictions"]]
    assert formats.content_hash(again.suite) == formats.content_hash(result.suite)
    # CSV carries items and regions; meta and predictions come from the caller.
    from_csv = formats.parse_suite_csv(
        formats.to_csv_text(result.suite),
        meta=result.suite["meta"],
        predictions=result.suite["predictions"],
    )
    assert from_csv.ok, from_csv.errors
    assert from_csv.suite == result.suite


@pytest.mark.skipif(not MASTER.is_dir() or not NEXTFLOW.is_dir(), reason=NO_DATA)
@pytest.mark.parametrize("branch", [MASTER, NEXTFLOW], ids=["master", "nextflow"])
def test_2020_branch_counts(branch: Path) -> None:
    files = sorted(branch.glob("*.json"))
    assert len(files) == 34
    assert sum(len(_suite(p)["items"]) for p in files) == 842


@pytest.mark.skipif(not MASTER.is_dir() or not NEXTFLOW.is_dir(), reason=NO_DATA)
def test_master_and_nextflow_give_the_same_canonical_suites() -> None:
    for old in sorted(MASTER.glob("*.json")):
        master, nextflow = _suite(old), _suite(NEXTFLOW / old.name)
        # The branches differ only in brackets and whitespace, both gone once canonical.
        assert master["items"] == nextflow["items"], old.name
        assert master["predictions"] == nextflow["predictions"], old.name
        assert master == nextflow, old.name
        assert formats.content_hash(master) == formats.content_hash(nextflow)


@pytest.mark.skipif(not MASTER.is_dir(), reason=NO_DATA)
def test_number_suite_conditions_are_looked_up_by_name() -> None:
    path = MASTER / "number_orc.json"
    raw = json.loads(path.read_text("utf-8"))
    first = [c["condition_name"] for c in raw["items"][0]["conditions"]]
    shuffled = next(
        i
        for i, item in enumerate(raw["items"])
        if [c["condition_name"] for c in item["conditions"]] != first
    )
    suite = _suite(path)
    item = suite["items"][shuffled]
    assert [c["condition_name"] for c in item["conditions"]] == first
    for condition in raw["items"][shuffled]["conditions"]:
        canonical = next(
            c for c in item["conditions"] if c["condition_name"] == condition["condition_name"]
        )
        assert [r["content"] for r in canonical["regions"]] == [
            r["content"].strip() for r in condition["regions"]
        ]


@pytest.mark.skipif(not MASTER.is_dir(), reason=NO_DATA)
def test_stray_spaces_are_summarised_with_a_count() -> None:
    result = _load(MASTER / "npz_ambig.json")
    summary = result.warnings[result.warnings.index(_notes_about(result, STRAY_NOTE)[0])]
    assert summary.startswith(
        "removed leading/trailing spaces from 256 region contents in 24 of 24 items"
    )
    listed = [w for w in result.warnings if w.startswith("  item ")]
    assert len(listed) == 5
    assert (
        listed[0]
        == "  item 1, condition 'ambig_nocomma', region 4 ('NP/Z'): ' the woman' → 'the woman'"
    )
    assert "  … and 251 more" in result.warnings
    few = _load(MASTER / "fgd-embed3.json")
    assert _notes_about(few, STRAY_NOTE) == [
        "removed leading/trailing spaces from region content: item 8, condition 'what_gap', "
        "region 7 ('continuation'): 'to the criminal kingpin ' → 'to the criminal kingpin'",
        "removed leading/trailing spaces from region content: item 8, condition 'what_no-gap', "
        "region 7 ('continuation'): 'to the criminal kingpin ' → 'to the criminal kingpin'",
    ]


# -- a small suite to vary -------------------------------------------------------------------


def small() -> dict[str, Any]:
    """Two items, two conditions, three regions, one prediction; current format."""

    def item(number: int, subject: str) -> dict[str, Any]:
        return {
            "item_number": number,
            "conditions": [
                {
                    "condition_name": name,
                    "regions": [
                        {"region_number": 1, "content": subject},
                        {"region_number": 2, "content": verb},
                        {"region_number": 3, "content": "here."},
                    ],
                }
                for name, verb in (("match", "is"), ("mismatch", "are"))
            ],
        }

    return {
        "meta": {"name": "agreement", "metric": "sum"},
        "region_meta": {"1": "Subject", "2": "Verb", "3": "End"},
        "predictions": [{"type": "formula", "formula": "(2;%mismatch%) > (2;%match%)"}],
        "items": [item(1, "The dog"), item(2, "The cat")],
    }


def varied(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = small()
    change(data)
    return data


def test_small_suite_is_already_canonical() -> None:
    result = formats.parse_suite_data(small())
    assert result.ok and result.warnings == []
    assert result.source_format == formats.CURRENT
    assert result.suite == small()
    assert result.original_predictions == ["(2;%mismatch%) > (2;%match%)"]


def _bad_formula_col() -> int:
    with pytest.raises(predictions.PredictionError) as caught:
        predictions.parse("(2;%mismatch%) > (2;%match%")
    return caught.value.col


def _set(path: list[str | int], value: object) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _region_gap(data: dict[str, Any]) -> None:
    data["region_meta"] = {"1": "Subject", "2": "Verb", "4": "End"}
    for item in data["items"]:
        for condition in item["conditions"]:
            condition["regions"][2]["region_number"] = 4


def _missing_condition(data: dict[str, Any]) -> None:
    del data["items"][1]["conditions"][1]


def _extra_condition(data: dict[str, Any]) -> None:
    extra = copy.deepcopy(data["items"][1]["conditions"][1])
    extra["condition_name"] = "mismatch2"
    data["items"][1]["conditions"].append(extra)


BAD_DATA = [
    # (id, change, path, words the message must contain)
    ("not-an-object", None, "$", "a suite must be one JSON object"),
    (
        "missing-name",
        lambda d: d["meta"].pop("name"),
        "$.meta",
        'has no "name"; add "name": "<a unique name for the suite>" to meta',
    ),
    ("blank-name", _set(["meta", "name"], "  "), "$.meta.name", "meta.name is empty"),
    (
        "item-number-string",
        _set(["items", 0, "item_number"], "1"),
        "$.items[0].item_number",
        'items[0].item_number must be a whole number (such as 1), but it is the text "1"; '
        "write the number without quotes",
    ),
    (
        "item-number-fraction",
        _set(["items", 1, "item_number"], 1.5),
        "$.items[1].item_number",
        "must be a whole number",
    ),
    (
        "duplicate-item-number",
        _set(["items", 1, "item_number"], 1),
        "$.items[1].item_number",
        "item number 1 is used twice (items[0] and items[1]); every item needs its own item_number",
    ),
    (
        "region-gap",
        _region_gap,
        "$.region_meta",
        "region_meta numbers its regions 1, 2, 4, but region numbers must run from 1 without gaps: "
        'region 3 is missing; add "3": "<name>" to region_meta',
    ),
    (
        "region-not-in-region-meta",
        lambda d: d["region_meta"].pop("3"),
        "$.items[0].conditions[0].regions[2].region_number",
        'region 3 is not in region_meta, which names regions 1 and 2; add "3": "<name>" to '
        "region_meta, or remove region 3 from the items (it appears in 4 conditions)",
    ),
    (
        "region-never-used",
        _set(["region_meta", "4"], "Extra"),
        '$.region_meta["4"]',
        "region 4 ('Extra') is in region_meta but no condition lists it",
    ),
    (
        "region-listed-twice",
        _set(["items", 1, "conditions", 0, "regions", 2, "region_number"], 2),
        "$.items[1].conditions[0].regions[2].region_number",
        "item 2 (index 1), condition 'match' lists region 2 twice (regions[1] and regions[2]); "
        "list each region once",
    ),
    (
        "region-missing",
        lambda d: d["items"][1]["conditions"][0]["regions"].pop(1),
        "$.items[1].conditions[0].regions",
        "item 2 (index 1), condition 'match' has no region 2 ('Verb'); every condition lists each "
        "region of region_meta once",
    ),
    (
        "region-number-zero",
        _set(["items", 0, "conditions", 0, "regions", 0, "region_number"], 0),
        "$.items[0].conditions[0].regions[0].region_number",
        "must be 1 or more",
    ),
    (
        "content-not-text",
        _set(["items", 0, "conditions", 1, "regions", 0, "content"], 7),
        "$.items[0].conditions[1].regions[0].content",
        "items[0].conditions[1].regions[0].content must be text in double quotes, but it is the number 7",
    ),
    (
        "missing-content",
        lambda d: d["items"][0]["conditions"][0]["regions"][0].pop("content"),
        "$.items[0].conditions[0].regions[0]",
        'has no "content"',
    ),
    (
        "item-missing-condition",
        _missing_condition,
        "$.items[1].conditions",
        "item 2 (index 1) has no condition 'mismatch'; every item needs the same conditions: "
        "match, mismatch",
    ),
    (
        "extra-condition",
        _extra_condition,
        "$.items[1].conditions[2].condition_name",
        "item 2 (index 1) has a condition 'mismatch2' that the first item (item 1 (index 0)) does "
        "not have; every item needs the same conditions: match, mismatch",
    ),
    (
        "misspelt-condition",
        _set(["items", 1, "conditions", 1, "condition_name"], "missmatch"),
        "$.items[1].conditions[1].condition_name",
        "(is it a misspelling of 'mismatch'?)",
    ),
    (
        "duplicate-condition",
        _set(["items", 1, "conditions", 1, "condition_name"], "match"),
        "$.items[1].conditions[1].condition_name",
        "item 2 (index 1) has two conditions named 'match' (conditions[0] and conditions[1]); "
        "condition names must differ within an item",
    ),
    (
        "empty-condition-name",
        _set(["items", 0, "conditions", 0, "condition_name"], ""),
        "$.items[0].conditions[0].condition_name",
        "is empty",
    ),
    (
        "bad-formula",
        _set(["predictions", 0, "formula"], "(2;%mismatch%) > (2;%match%"),
        "$.predictions[0].formula",
        f"col {_bad_formula_col()}: ",
    ),
    (
        "bad-string-formula",
        _set(["predictions"], ["(2;%mismatch%) >"]),
        "$.predictions[0]",
        'formula: "(2;%mismatch%) >"',
    ),
    (
        "formula-unknown-region",
        _set(["predictions", 0, "formula"], "(9;%mismatch%) > (2;%match%)"),
        "$.predictions[0].formula",
        "region 9 does not exist",
    ),
    (
        "formula-unknown-condition",
        _set(["predictions", 0, "formula"], "(2;%nope%) > (2;%match%)"),
        "$.predictions[0].formula",
        "condition 'nope' does not exist",
    ),
    (
        "unknown-relation",
        _set(
            ["predictions"],
            [
                {
                    "relation": "biggerthan",
                    "region_number": 2,
                    "l_operand": "mismatch",
                    "r_operand": "match",
                }
            ],
        ),
        "$.predictions[0].relation",
        "unknown relation 'biggerthan'",
    ),
    (
        "relation-unknown-region",
        _set(
            ["predictions"],
            [
                {
                    "relation": "greaterthan",
                    "region_number": 7,
                    "l_operand": "mismatch",
                    "r_operand": "match",
                }
            ],
        ),
        "$.predictions[0]",
        "region 7 does not exist",
    ),
    (
        "prediction-not-formula",
        _set(["predictions"], [5]),
        "$.predictions[0]",
        "predictions[0] must be a JSON object ({…}), but it is the number 5; write each prediction as",
    ),
    (
        "prediction-type",
        _set(["predictions", 0, "type"], "relation"),
        "$.predictions[0].type",
        'must be "formula"',
    ),
    (
        "empty-items",
        _set(["items"], []),
        "$.items",
        "items is an empty list; a suite needs at least one item",
    ),
    (
        "items-not-list",
        _set(["items"], {"1": {}}),
        "$.items",
        "items must be a list ([…]), but it is a JSON object",
    ),
    (
        "metric-number",
        _set(["meta", "metric"], 5),
        "$.meta.metric",
        "meta.metric must be one of sum, mean, median, range, max, min, all, or a list of them",
    ),
    ("metric-unknown", _set(["meta", "metric"], "average"), "$.meta.metric", 'not "average"'),
    (
        "metric-list-of-numbers",
        _set(["meta", "metric"], [1]),
        "$.meta.metric",
        "meta.metric must be one of",
    ),
    (
        "region-meta-key",
        _set(["region_meta", "one"], "x"),
        "$.region_meta",
        'region_meta keys must be region numbers written as text ("1", "2", …), and "one" is not one',
    ),
    (
        "region-name-not-text",
        _set(["region_meta", "1"], 1),
        '$.region_meta["1"]',
        "must be text in double quotes",
    ),
    (
        "tags-not-list",
        _set(["meta", "tags"], "agreement"),
        "$.meta.tags",
        "meta.tags must be a list",
    ),
]


@pytest.mark.parametrize(
    ("change", "path", "words"), [c[1:] for c in BAD_DATA], ids=[c[0] for c in BAD_DATA]
)
def test_bad_suite_gets_a_specific_error(
    change: Callable[[dict[str, Any]], object] | None, path: str, words: str
) -> None:
    data: object = [small()] if change is None else varied(change)
    result = formats.parse_suite_data(data)
    assert not result.ok and result.suite is None
    matching = [e for e in result.errors if e.path == path and words in e.message]
    assert len(matching) == 1, "\n".join(map(str, result.errors))
    # What went wrong also survives a trip through JSON text.
    again = formats.parse_suite_text(json.dumps(data))
    assert again.errors == result.errors


def test_malformed_json_reports_line_and_column() -> None:
    result = formats.parse_suite_text('{\n  "meta": {"name": "x",}\n}')
    assert result.errors == [
        SuiteError(
            "$",
            "the file is not valid JSON: Expecting property name enclosed in double quotes at "
            "line 2, column 24; fix the JSON there (a missing comma, quote or bracket is the "
            "usual cause)",
        )
    ]
    assert result.suite is None and not result.ok


def test_bad_utf8_is_an_error_and_a_bom_is_not() -> None:
    result = formats.parse_suite_text(b'{"meta": {"name": "caf\xe9"}}')
    (error,) = result.errors
    assert error.path == "$"
    assert "not UTF-8 text: the byte 0xe9 on line 1" in error.message
    text = json.dumps(small(), ensure_ascii=False)
    assert formats.parse_suite_text(b"\xef\xbb\xbf" + text.encode("utf-8")).suite == small()
    assert formats.parse_suite_text("\ufeff" + text).suite == small()


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    result = formats.load_suite_file(tmp_path / "nope.json")
    assert [e.path for e in result.errors] == ["$"]
    assert "cannot read" in result.errors[0].message


def test_all_schema_errors_come_at_once_in_document_order() -> None:
    data = small()
    data["items"][1]["item_number"] = "2"
    data["items"][0]["conditions"][0]["regions"][0]["content"] = None
    del data["meta"]["name"]
    paths = [e.path for e in formats.parse_suite_data(data).errors]
    assert paths == [
        "$.items[0].conditions[0].regions[0].content",
        "$.items[1].item_number",
        "$.meta",
    ]


def test_error_list_is_capped() -> None:
    data = small()
    template = data["items"][1]
    data["items"] = [data["items"][0]] + [
        {**copy.deepcopy(template), "item_number": n, "conditions": template["conditions"][:1]}
        for n in range(2, 302)
    ]
    errors = formats.parse_suite_data(data).errors
    assert len(errors) == formats.MAX_ERRORS + 1
    assert errors[-1] == SuiteError(
        "$", "… and 100 more errors not shown; fix the ones above first"
    )


def test_suite_error_as_dict() -> None:
    error = SuiteError.at(["items", 0], "wrong")
    assert error.path == "$.items[0]"
    assert error.as_dict() == {
        "path": "$.items[0]",
        "message": "wrong",
        "location": {"section": "items", "item": 0},
    }
    assert str(error) == "$.items[0]: wrong"
    assert SuiteError("$", "whole suite").as_dict()["location"] == {}


@pytest.mark.parametrize(
    ("parts", "location"),
    [
        (
            ["items", 3, "conditions", 1, "regions", 0, "content"],
            Location(section="items", item=3, condition=1, region=0, key="content"),
        ),
        (["items", 2, "conditions"], Location(section="items", item=2, key="conditions")),
        (
            ["items", 2, "conditions", 1, "condition_name"],
            Location(section="items", item=2, condition=1, key="condition_name"),
        ),
        (["region_meta", "4"], Location(section="region_meta", region_number=4)),
        (
            ["predictions", 1, "formula"],
            Location(section="predictions", prediction=1, key="formula"),
        ),
        (["meta", "name"], Location(section="meta", key="name")),
        ([], Location()),
    ],
)
def test_error_locations_come_from_the_path_parts(parts: list[Any], location: Any) -> None:
    assert Location.of(parts) == location


def test_checks_locate_their_errors_by_index() -> None:
    data = small()
    data["items"][1]["conditions"][0]["regions"][2]["content"] = 7
    data["predictions"] = [{"type": "formula", "formula": "(1;%match%) > (9;%mismatch%)"}]
    schema = formats.parse_suite_data(data)
    [error] = schema.errors
    assert error.location == Location(section="items", item=1, condition=0, region=2, key="content")
    data["items"][1]["conditions"][0]["regions"][2]["content"] = "fine"
    [error] = formats.parse_suite_data(data).errors
    assert error.location.section == "predictions" and error.location.prediction == 0


# -- versions and normalisation --------------------------------------------------------------


def test_string_predictions() -> None:
    data = varied(
        _set(["predictions"], ["(2;%mismatch%)>(2;%match%)", "[(1;%match%) = (1;%mismatch%)]"])
    )
    result = formats.parse_suite_data(data)
    assert result.ok, result.errors
    assert result.source_format == formats.STRING_PREDICTIONS
    assert result.suite is not None
    assert result.suite["predictions"] == [
        {"type": "formula", "formula": "(2;%mismatch%) > (2;%match%)"},
        {"type": "formula", "formula": "(1;%match%) = (1;%mismatch%)"},
    ]
    assert result.original_predictions == data["predictions"]


def test_bracket_formulas_keep_their_original_text() -> None:
    formula = "[(2;%mismatch%) - (2;%match%)] - [(1;%mismatch%) - (1;%match%)] > 0"
    result = formats.parse_suite_data(varied(_set(["predictions", 0, "formula"], formula)))
    assert result.source_format == formats.BRACKET_FORMULAS
    assert result.suite is not None
    assert result.suite["predictions"][0]["formula"] == (
        "(2;%mismatch%) - (2;%match%) - ((1;%mismatch%) - (1;%match%)) > 0"
    )
    assert result.original_predictions == [formula]
    assert result.warnings == [
        "prediction 1: square-bracket grouping was rewritten with parentheses: "
        "(2;%mismatch%) - (2;%match%) - ((1;%mismatch%) - (1;%match%)) > 0"
    ]


def test_no_predictions_key_and_empty_predictions() -> None:
    absent = formats.parse_suite_data(varied(lambda d: d.pop("predictions")))
    assert absent.ok and absent.source_format == formats.NO_PREDICTIONS
    assert absent.suite is not None
    assert absent.suite["predictions"] == [] and absent.original_predictions == []
    assert absent.warnings == [
        'the suite has no "predictions" key, so no predictions: it can be scored, but no item '
        "can pass or fail until predictions are added"
    ]
    empty = formats.parse_suite_data(varied(_set(["predictions"], [])))
    assert empty.ok and empty.source_format == formats.CURRENT
    assert empty.warnings == [
        'the suite has no predictions ("predictions" is empty): it can be scored, but no item '
        "can pass or fail until predictions are added"
    ]


@pytest.mark.parametrize("metric", ["all", "mean", ["sum", "mean"], ["all"]])
def test_metric_is_kept_as_given(metric: object) -> None:
    result = formats.parse_suite_data(varied(_set(["meta", "metric"], metric)))
    assert result.ok, result.errors
    assert result.suite is not None
    assert result.suite["meta"]["metric"] == metric
    assert result.warnings == []


def test_missing_metric_means_sum() -> None:
    result = formats.parse_suite_data(varied(lambda d: d["meta"].pop("metric")))
    assert result.suite is not None
    assert result.suite["meta"]["metric"] == "sum"
    assert result.warnings == ['meta has no "metric"; using "sum", SyntaxGym\'s default']


def test_metric_changes_the_content_hash_and_meta_text_does_not() -> None:
    base = formats.content_hash(small())
    assert formats.content_hash(varied(_set(["meta", "metric"], "mean"))) != base
    assert (
        formats.content_hash(
            varied(_set(["items", 0, "conditions", 0, "regions", 0, "content"], "A dog"))
        )
        != base
    )
    assert formats.content_hash(varied(_set(["predictions"], []))) != base
    assert formats.content_hash(varied(_set(["region_meta", "3"], "Rest"))) != base
    for key, value in (("name", "other"), ("description", "d"), ("tags", ["t"]), ("lab", 1)):
        assert formats.content_hash(varied(_set(["meta", key], value))) == base
    assert len(base) == 64 and int(base, 16) >= 0


def test_tags_become_sorted_unique_slugs() -> None:
    data = varied(_set(["meta", "tags"], ["Filler Gap", "agreement", "agreement", "!!"]))
    result = formats.parse_suite_data(data)
    assert result.suite is not None
    assert result.suite["meta"]["tags"] == ["agreement", "filler-gap"]
    assert result.warnings == [
        "tag 'Filler Gap' is stored as 'filler-gap' (tags are lower-case slugs)",
        "tag '!!' was dropped: a tag needs letters or digits",
    ]


def test_extra_meta_keys_are_kept_and_exported_after_the_known_ones() -> None:
    data = small()
    data["meta"] = {
        "lab": {"pi": "R. Levy", "year": 2020},
        "name": "agreement",
        "comment": "",
        "author": "Ethan",
        "tags": ["agreement"],
        "version": 2,
        "metric": "sum",
    }
    result = formats.parse_suite_data(data)
    assert result.ok and result.warnings == []
    assert result.suite is not None
    meta = result.suite["meta"]
    # An empty comment says nothing; the site does not store or write one back either.
    assert "comment" not in meta
    assert meta["lab"] == {"pi": "R. Levy", "year": 2020} and meta["version"] == 2
    exported = json.loads(formats.to_json_text(result.suite))
    assert list(exported["meta"]) == ["name", "metric", "author", "tags", "lab", "version"]
    assert formats.parse_suite_text(formats.to_json_text(result.suite)).suite == result.suite


def test_results_file_keeps_the_suite_and_drops_the_scores() -> None:
    data = small()
    data["meta"]["model"] = "gpt2"
    for item in data["items"]:
        for condition in item["conditions"]:
            for region in condition["regions"]:
                region["metric_value"] = {"sum": 1.5, "mean": float("nan")}
    result = formats.parse_suite_data(data)
    assert result.ok and result.source_format == formats.RESULTS
    assert result.suite == small()
    assert result.warnings == [
        "this is a results file (a suite together with a model's scores): ignored the model's "
        'scores (metric_value) on 12 regions and meta.model "gpt2"; only the suite itself was '
        "imported"
    ]


def test_unknown_keys_outside_meta_are_reported_not_silently_dropped() -> None:
    data = small()
    data["notes"] = "see paper"
    for item in data["items"]:
        item["source"] = "paper"
    data["items"][0]["conditions"][0]["regions"][0]["gloss"] = "DET N"
    result = formats.parse_suite_data(data)
    assert result.ok and result.suite == small()
    assert result.warnings == [
        'ignored the key "notes" at $.notes: it is not part of the SyntaxGym format; move it '
        "into meta to keep it",
        'ignored the key "source" at $.items[0].source and 1 other place: it is not part of the '
        "SyntaxGym format",
        'ignored the key "gloss" at $.items[0].conditions[0].regions[0].gloss: it is not part '
        "of the SyntaxGym format",
    ]


def test_duplicate_json_keys_are_reported() -> None:
    text = json.dumps(small())[:-1] + ', "items": []}'
    result = formats.parse_suite_text(text)
    assert (
        result.warnings[0]
        == 'the key "items" appears twice in one JSON object; only the last value was used'
    )
    assert [e.path for e in result.errors] == ["$.items"]


def test_conditions_in_another_order_and_regions_out_of_order() -> None:
    data = small()
    data["items"][1]["conditions"].reverse()
    data["items"][0]["conditions"][1]["regions"].reverse()
    data["items"][0]["conditions"][0]["regions"][1]["content"] = "  is\t"
    data["region_meta"] = {"3": "End", "1": "Subject", "2": "Verb"}
    result = formats.parse_suite_data(data)
    assert result.ok, result.errors
    assert result.suite == small()
    assert list(result.suite["region_meta"]) == ["1", "2", "3"]
    assert result.warnings == [
        "removed leading/trailing spaces from region content: item 1, condition 'match', "
        "region 2 ('Verb'): '  is\\t' → 'is'"
    ]


def test_float_item_numbers_that_are_whole_become_integers() -> None:
    result = formats.parse_suite_data(varied(_set(["items", 0, "item_number"], 1.0)))
    assert result.ok and result.suite == small()
    assert type(result.suite["items"][0]["item_number"]) is int


def test_meta_name_is_stripped_with_a_note() -> None:
    result = formats.parse_suite_data(varied(_set(["meta", "name"], " agreement ")))
    assert result.suite is not None
    assert result.suite["meta"]["name"] == "agreement"
    assert result.warnings == [
        "meta.name ' agreement ' had leading/trailing spaces; it is now 'agreement'"
    ]


# -- readers of the canonical form ------------------------------------------------------------


def test_sentences_region_and_condition_names() -> None:
    suite = small()
    suite["items"][0]["conditions"][0]["regions"].reverse()
    assert formats.sentences(suite)[:2] == [
        (1, "match", ["The dog", "is", "here."]),
        (1, "mismatch", ["The dog", "are", "here."]),
    ]
    assert len(formats.sentences(suite)) == 4
    assert formats.region_names(suite) == ["Subject", "Verb", "End"]
    assert formats.condition_names(suite) == ["match", "mismatch"]


def test_json_export_is_stable_and_readable() -> None:
    suite = small()
    suite["items"][0]["conditions"][0]["regions"][0]["content"] = "Der Hund – ein Tier"
    text = formats.to_json_text(suite)
    assert text.endswith("}\n") and "Der Hund – ein Tier" in text
    assert text.startswith('{\n  "meta": {\n    "name": "agreement",')
    shuffled = {key: suite[key] for key in ("items", "predictions", "region_meta", "meta")}
    assert formats.to_json_text(shuffled) == text


def test_schema_file_is_a_valid_json_schema() -> None:
    schema = formats.load_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


# -- CSV ---------------------------------------------------------------------------------------


def test_csv_export_header_and_quoting() -> None:
    suite = small()
    suite["items"][0]["conditions"][0]["regions"][0]["content"] = 'The "big", old\ndog'
    text = formats.to_csv_text(suite)
    lines = text.split("\r\n")
    assert lines[0] == "item_number,condition_name,region_number,region_name,content"
    assert lines[1] == '1,match,1,Subject,"The ""big"", old\ndog"'
    assert lines[2] == "1,match,2,Verb,is"
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 1 + 2 * 2 * 3
    assert rows[1][4] == 'The "big", old\ndog'
    assert (
        formats.parse_suite_csv(text, meta=suite["meta"], predictions=suite["predictions"]).suite
        == suite
    )


def test_csv_import_builds_the_suite() -> None:
    text = "\n".join(
        [
            "Item_Number, condition_name,region_number,region_name,content,notes",
            "7,b,2,Verb,  runs ,x",
            "7,b,1,Subject,The dog,",
            "",
            "7,a,1,Subject,The dogs,",
            "7,a,2,Verb,run,",
        ]
    )
    result = formats.parse_suite_csv(text, meta={"name": "csv", "metric": "sum"})
    assert result.ok, result.errors
    assert result.source_format == formats.CSV_FORMAT
    assert result.suite == {
        "meta": {"name": "csv", "metric": "sum"},
        "region_meta": {"1": "Subject", "2": "Verb"},
        "predictions": [],
        "items": [
            {
                "item_number": 7,
                "conditions": [
                    {
                        "condition_name": "b",
                        "regions": [
                            {"region_number": 1, "content": "The dog"},
                            {"region_number": 2, "content": "runs"},
                        ],
                    },
                    {
                        "condition_name": "a",
                        "regions": [
                            {"region_number": 1, "content": "The dogs"},
                            {"region_number": 2, "content": "run"},
                        ],
                    },
                ],
            }
        ],
    }
    assert result.warnings[0] == (
        "ignored the CSV column 'notes': Gym reads only item_number, condition_name, "
        "region_number, region_name, content"
    )
    assert any(STRAY_NOTE in w for w in result.warnings)


HEADER_ROW = "item_number,condition_name,region_number,region_name,content"
BAD_CSV = [
    ("empty", "", "csv line 1", "the CSV is empty"),
    ("no-rows", HEADER_ROW, "csv line 2", "the CSV has a header but no rows"),
    (
        "missing-column",
        "item_number,condition_name,region_number,content\n1,a,1,x",
        "csv line 1",
        "the header row has no 'region_name' column",
    ),
    (
        "too-many-fields",
        HEADER_ROW + "\n1,a,1,R,x\n1,a,2,S,y, z",
        "csv line 3",
        "this row has 6 fields but the header has 5",
    ),
    (
        "item-number",
        HEADER_ROW + "\n1,a,1,R,x\none,a,2,S,y",
        "csv line 3, column item_number",
        "item_number must be a whole number, not 'one'",
    ),
    (
        "region-number",
        HEADER_ROW + "\n1,a,0,R,x",
        "csv line 2, column region_number",
        "region_number must be a whole number from 1 up, not '0'",
    ),
    (
        "region-name-conflict",
        HEADER_ROW + "\n1,a,1,R,x\n1,b,1,Q,y",
        "csv line 3, column region_name",
        "region 1 is called 'R' on line 2 but 'Q' here",
    ),
    (
        "missing-condition",
        HEADER_ROW + '\n1,a,1,R,"two\nlines"\n1,b,1,R,y\n2,a,1,R,z',
        "csv line 5",
        "item 2 (index 1) has no condition 'b'",
    ),
    (
        "region-twice",
        HEADER_ROW + "\n1,a,1,R,x\n1,a,2,S,y\n1,a,2,S,z",
        "csv line 4, column region_number",
        "lists region 2 twice",
    ),
    (
        "region-gap",
        HEADER_ROW + "\n1,a,1,R,x\n1,a,3,S,y",
        "csv column region_number",
        "no row has region 2; add rows for it or renumber the regions",
    ),
    ("bad-quotes", HEADER_ROW + '\n1,a,1,R,"x"y', "csv line 2", "the CSV cannot be read here"),
    ("meta-without-name", HEADER_ROW + "\n1,a,1,R,x", "$.meta", 'has no "name"'),
]


@pytest.mark.parametrize(
    ("text", "path", "words"), [c[1:] for c in BAD_CSV], ids=[c[0] for c in BAD_CSV]
)
def test_bad_csv_gets_an_error_at_its_row(text: str, path: str, words: str) -> None:
    meta: dict[str, Any] = {} if "name" in words else {"name": "csv", "metric": "sum"}
    result = formats.parse_suite_csv(text, meta=meta)
    assert not result.ok and result.suite is None
    assert any(e.path == path and words in e.message for e in result.errors), "\n".join(
        map(str, result.errors)
    )
    # The same place as numbers, for programs: the CSV line and column (meta, which the
    # CSV does not hold, keeps its JSON path).
    for error in (e for e in result.errors if e.location.section is None):
        at = error.location
        assert error.path == "csv " + ", ".join(
            [f"line {at.line}"] * (at.line is not None)
            + [f"column {at.column}"] * (at.column is not None)
        )


# -- random suites -----------------------------------------------------------------------------

# Any Unicode a database can store: no NUL (refused with a located error), no surrogates.
STORABLE = st.characters(exclude_characters="\x00", exclude_categories=["Cs"])
CONDITION = st.text(alphabet=string.ascii_letters + string.digits + "_-.", min_size=1, max_size=8)
SLUG = st.from_regex(r"[a-z0-9]{1,6}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
KNOWN_META = {"name", "metric", "description", "reference", "author", "comment", "tags", "model"}


@st.composite
def suites(draw: st.DrawFn) -> dict[str, Any]:
    """Small canonical suites with awkward text: commas, quotes, line breaks, any Unicode."""
    region_count = draw(st.integers(1, 4))
    conditions = draw(st.lists(CONDITION, min_size=1, max_size=3, unique=True))
    numbers = draw(st.lists(st.integers(-3, 10_000), min_size=1, max_size=4, unique=True))
    meta: dict[str, Any] = {
        "name": draw(st.text(STORABLE, min_size=1, max_size=12).map(str.strip).filter(bool)),
        "metric": draw(st.sampled_from(["sum", "all", "mean", ["sum", "max"]])),
    }
    if draw(st.booleans()):
        meta["description"] = draw(st.text(STORABLE, min_size=1, max_size=20))
    tags = draw(st.lists(SLUG, max_size=3, unique=True))
    if tags:
        meta["tags"] = sorted(tags)
    extra = draw(
        st.dictionaries(
            st.text(STORABLE, min_size=1, max_size=6).filter(lambda k: k not in KNOWN_META),
            st.integers() | st.text(STORABLE, max_size=5) | st.lists(st.booleans(), max_size=2),
            max_size=2,
        )
    )
    meta.update(extra)
    formulas = draw(
        st.lists(
            st.builds(
                lambda region, a, op, b: f"({region};%{a}%) {op} ({region};%{b}%)",
                st.integers(1, region_count),
                st.sampled_from(conditions),
                st.sampled_from("<>="),
                st.sampled_from(conditions),
            ),
            max_size=2,
        )
    )
    content = st.text(STORABLE, max_size=12).map(str.strip)
    # A condition with only empty regions is refused (no sentence): the first has words.
    words = st.text(STORABLE, min_size=1, max_size=12).map(str.strip).filter(bool)
    return {
        "meta": meta,
        "region_meta": {
            str(n): draw(st.text(STORABLE, max_size=8)) for n in range(1, region_count + 1)
        },
        "predictions": [{"type": "formula", "formula": f} for f in formulas],
        "items": [
            {
                "item_number": number,
                "conditions": [
                    {
                        "condition_name": name,
                        "regions": [
                            {"region_number": r, "content": draw(words if r == 1 else content)}
                            for r in range(1, region_count + 1)
                        ],
                    }
                    for name in conditions
                ],
            }
            for number in numbers
        ],
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(suites())
def test_random_suites_round_trip_through_json(suite: dict[str, Any]) -> None:
    result = formats.parse_suite_data(suite)
    assert result.ok, result.errors
    assert result.suite == suite
    text = formats.to_json_text(suite)
    again = formats.parse_suite_text(text)
    assert again.ok, again.errors
    assert again.suite == suite
    assert formats.to_json_text(again.suite) == text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(suites())
def test_random_suites_round_trip_through_csv(suite: dict[str, Any]) -> None:
    text = formats.to_csv_text(suite)
    result = formats.parse_suite_csv(text, meta=suite["meta"], predictions=suite["predictions"])
    assert result.ok, result.errors
    assert result.suite == suite
    assert formats.to_csv_text(result.suite) == text


def test_inlined_schema_finds_the_same_errors_as_the_schema_with_refs() -> None:
    from suites.formats import schema as schema_module

    raw = schema_module.load_schema()
    cls = jsonschema.validators.validator_for(raw)
    with_refs, inlined = cls(raw), cls(schema_module.inline_refs(raw))
    assert "$ref" not in json.dumps(schema_module.inline_refs(raw))
    bad = small()
    bad["meta"]["name"] = " "
    bad["meta"]["metric"] = ["sum", "mode"]
    bad["predictions"] = [{"type": "formula", "formula": ""}, {"relation": "greaterthan"}]
    bad["items"][0]["item_number"] = "1"
    bad["items"][0]["conditions"][0]["condition_name"] = ""
    bad["items"][1]["conditions"][1]["regions"] = [{"region_number": 0}]

    def found(validator: Any) -> list[tuple[str, str]]:
        return sorted((str(list(e.absolute_path)), e.message) for e in validator.iter_errors(bad))

    assert found(with_refs) == found(inlined)
    assert len(found(inlined)) >= 7


def test_a_recursive_schema_definition_is_refused_by_inlining() -> None:
    from suites.formats.schema import inline_refs

    recursive = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    with pytest.raises(ValueError, match="'node' is recursive"):
        inline_refs({**recursive, "items": {"$ref": "#/$defs/node"}})
