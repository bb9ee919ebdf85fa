"""Downloads for analysis elsewhere: the per-item, per-prediction outcomes in the results
JSON, and the long-format export of a selection (one model, one suite, a tag, the whole
leaderboard) as CSV and Parquet from the pages and the API, read back with the csv module
and pyarrow and checked against the stored values."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from evaluations.models import Evaluation, LanguageModel
from evaluations.syntaxgym import exports
from suites.syntaxgym import services as suite_services
from tests.syntaxgym.test_results_pages import TOKENS, store_done, suite_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def board() -> dict[str, Any]:
    """Two models on two suites of different tags, plus a hidden model and an outdated
    result that no export includes."""
    first = suite_services.suite_import(source=suite_data("what? #1 100%"), owner=None).suite
    other = suite_data("second")
    other["meta"]["tags"] = ["other"]
    second = suite_services.suite_import(source=other, owner=None).suite
    a = LanguageModel.objects.create(name="lm-a", display_name="A", source="hub/a")
    b = LanguageModel.objects.create(name="lm-b", display_name="B", source="hub/b")
    hidden = LanguageModel.objects.create(
        name="lm-h", display_name="H", source="hub/h", is_hidden=True
    )
    evaluations = {
        (m.name, s.name): store_done(m, s) for m in (a, b, hidden) for s in (first, second)
    }
    old = store_done(LanguageModel.objects.create(name="lm-o", display_name="O", source="o"), first)
    Evaluation.objects.filter(pk=old.pk).update(content_hash="0" * 64)
    return {"evaluations": evaluations, "first": first, "second": second}


def read_csv(response) -> list[dict[str, str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_results_json_carries_outcomes_per_item_and_prediction(anon_client, board) -> None:
    evaluation = board["evaluations"][("lm-a", "second")]
    document = json.loads(anon_client.get(f"/evaluations/{evaluation.pk}/results.json").content)
    results = document["results"]
    assert [p["formula"] for p in results["predictions"]] == [
        "(2;%mismatch%) > (2;%match%)",
        "(3;%mismatch%) > (3;%match%)",
    ]
    assert [(p["passed"], p["evaluated"]) for p in results["predictions"]] == [(2, 3), (2, 3)]
    assert results["items"] == [
        {"item_number": 1, "outcomes": [True, True], "passed": True},
        {"item_number": 2, "outcomes": [True, False], "passed": False},
        {"item_number": 3, "outcomes": [False, True], "passed": False},
    ]


def _expected_sum(item: int, condition: str, region: int) -> float | None:
    tokens = TOKENS[item][condition][region - 1]
    present = [t for t in tokens if t is not None]
    return float(sum(present)) if len(present) == len(tokens) else None


def test_long_csv_of_one_suite(anon_client, board) -> None:
    response = anon_client.get("/results.csv", {"suite": "what? #1 100%"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="results-what-1-100.csv"' in response["Content-Disposition"]
    rows = read_csv(response)
    assert list(rows[0]) == exports.LONG_COLUMNS
    # Hidden and outdated results are left out, as on the leaderboard.
    assert {(r["model"], r["suite"]) for r in rows} == {
        ("lm-a", "what? #1 100%"),
        ("lm-b", "what? #1 100%"),
    }
    regions = [r for r in rows if r["kind"] == "region"]
    predictions = [r for r in rows if r["kind"] == "prediction"]
    # 2 models x 3 items x 2 conditions x 3 regions x 6 metrics; 2 x 3 items x 2 predictions.
    assert len(regions) == 2 * 3 * 2 * 3 * 6 and len(predictions) == 2 * 3 * 2
    sums = {
        (r["model"], int(r["item"]), r["condition"], int(r["region"])): r
        for r in regions
        if r["metric"] == "sum"
    }
    for (_model, item, condition, region), row in sums.items():
        expected = _expected_sum(item, condition, region)
        assert row["value"] == ("" if expected is None else repr(expected))
        assert row["region_name"] == {1: "Subject", 2: "Verb", 3: "End"}[region]
        assert row["prediction"] == row["outcome"] == row["formula"] == ""
    mean = next(
        r
        for r in regions
        if (r["model"], r["item"], r["condition"], r["region"], r["metric"])
        == ("lm-a", "1", "mismatch", "1", "mean")
    )
    assert float(mean["value"]) == pytest.approx(2.5)
    outcomes = {(r["model"], int(r["item"]), int(r["prediction"])): r for r in predictions}
    assert outcomes[("lm-b", 2, 2)]["outcome"] == "false"
    assert outcomes[("lm-b", 2, 1)]["outcome"] == "true"
    assert outcomes[("lm-b", 3, 1)]["formula"] == "(2;%mismatch%) > (2;%match%)"
    assert outcomes[("lm-b", 3, 1)]["condition"] == outcomes[("lm-b", 3, 1)]["value"] == ""


def test_selections_by_model_tag_and_all(anon_client, dana_client, board) -> None:
    def pairs(client, **query: str) -> set[tuple[str, str]]:
        response = client.get("/results.csv", query)
        assert response.status_code == 200
        return {(r["model"], r["suite"]) for r in read_csv(response)}

    first, second = "what? #1 100%", "second"
    assert pairs(anon_client, model="lm-b") == {("lm-b", first), ("lm-b", second)}
    assert pairs(anon_client, tag="other") == {("lm-a", second), ("lm-b", second)}
    assert pairs(anon_client, tag="agreement", model="lm-a") == {("lm-a", first)}
    assert pairs(anon_client) == {(m, s) for m in ("lm-a", "lm-b") for s in (first, second)}
    # Staff see hidden models, as on their leaderboard.
    assert ("lm-h", second) in pairs(dana_client, tag="other")
    assert pairs(anon_client, tag="untagged") == set()
    for query in ({"model": "nope"}, {"suite": "nope"}, {"tag": "nope"}):
        response = anon_client.get("/results.csv", query)
        assert response.status_code == 404 and b"nope" in response.content
    assert anon_client.get("/results.xlsx").status_code == 404
    # A NUL is refused by the request guard; other names that no suite has are not found.
    assert anon_client.get("/results.parquet", {"suite": "a\x00b"}).status_code == 400
    for hostile in ("x" * 5000, "' OR 1=1 --"):
        assert anon_client.get("/results.parquet", {"suite": hostile}).status_code == 404


def test_parquet_has_the_csv_rows_typed(anon_client, board) -> None:
    response = anon_client.get("/results.parquet", {"model": "lm-a"})
    assert response.status_code == 200
    assert 'filename="results-lm-a.parquet"' in response["Content-Disposition"]
    table = pq.read_table(io.BytesIO(response.content))
    assert table.column_names == exports.LONG_COLUMNS
    assert str(table.schema.field("value").type) == "double"
    assert str(table.schema.field("outcome").type) == "bool"
    rows = table.to_pylist()
    csv_rows = read_csv(anon_client.get("/results.csv", {"model": "lm-a"}))
    assert len(rows) == len(csv_rows) == 2 * (3 * 2 * 3 * 6 + 3 * 2)
    for row, line in zip(rows, csv_rows, strict=True):
        assert row["kind"] == line["kind"] and row["item"] == int(line["item"])
        assert row["value"] == (float(line["value"]) if line["value"] else None)
    missing = next(
        r
        for r in rows
        if (r["suite"], r["item"], r["condition"], r["region"], r["metric"])
        == ("second", 3, "match", 1, "sum")
    )
    assert missing["value"] is None
    verb = next(
        r
        for r in rows
        if (r["suite"], r["item"], r["condition"], r["region"], r["metric"])
        == ("second", 2, "mismatch", 2, "sum")
    )
    assert verb["value"] == 6.0 and verb["region_name"] == "Verb"
    outcomes = [
        (r["item"], r["prediction"], r["outcome"])
        for r in rows
        if r["kind"] == "prediction" and r["suite"] == "second"
    ]
    assert outcomes == [
        (1, 1, True),
        (1, 2, True),
        (2, 1, True),
        (2, 2, False),
        (3, 1, False),
        (3, 2, True),
    ]
    # An empty selection is still a readable file with the columns.
    empty = anon_client.get("/results.parquet", {"tag": "untagged"})
    assert pq.read_table(io.BytesIO(empty.content)).num_rows == 0


def test_export_api(anon_client, board) -> None:
    response = anon_client.get("/api/results/export/", {"suite": "second", "as": "parquet"})
    assert response.status_code == 200
    table = pq.read_table(io.BytesIO(response.content))
    assert set(table.column("model").to_pylist()) == {"lm-a", "lm-b"}
    as_csv = anon_client.get("/api/results/export/", {"suite": "second"})
    assert len(read_csv(as_csv)) == table.num_rows
    bad = anon_client.get("/api/results/export/", {"as": "xml"})
    assert bad.status_code == 400
    assert (
        bad.json()["errors"][0]["path"] == "$.as" and "'xml'" in bad.json()["errors"][0]["message"]
    )
    missing = anon_client.get("/api/results/export/", {"model": "nope"})
    assert missing.status_code == 404 and "'nope'" in missing.json()["errors"][0]["message"]


def test_pages_link_the_exports(anon_client, board) -> None:
    leaderboard = anon_client.get("/leaderboard/", {"tag": "other"}).content.decode()
    assert 'href="/results.csv?tag=other"' in leaderboard
    assert 'href="/results.parquet?tag=other"' in leaderboard
    model = anon_client.get("/models/lm-a/").content.decode()
    assert 'href="/results.csv?model=lm-a"' in model
    suite = anon_client.get("/suites/what%3F%20%231%20100%25/").content.decode()
    link = 'href="/results.csv?suite=what%3F%20%231%20100%25"'
    assert link in suite
    rows = read_csv(anon_client.get("/results.csv?suite=what%3F%20%231%20100%25"))
    assert {r["suite"] for r in rows} == {"what? #1 100%"}
