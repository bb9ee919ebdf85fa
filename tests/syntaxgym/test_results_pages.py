"""Result page of one model on one suite: accuracy, per-prediction accuracy, the per-item
table, the surprisal plot's numbers, and the downloads in the SyntaxGym results format and
as CSV. Results are stored the way the store task stores them (outcomes.score_items on
region values computed from token surprisals), without running a model."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluations import plots
from evaluations.models import (
    Evaluation,
    EvaluationSnapshot,
    LanguageModel,
)
from evaluations.scoring.metrics import region_metrics
from evaluations.syntaxgym import exports, outcomes, selectors
from evaluations.syntaxgym.services import evaluation_create, results_store
from suites import formats
from suites.models import Suite
from suites.syntaxgym import selectors as suite_selectors
from suites.syntaxgym import services as suite_services
from tests.conftest import SHARED_DATA, agreement_item, search, suite_document

pytestmark = pytest.mark.django_db

# Token surprisals (bits) per item, condition and region. None: a missing value (no BOS).
#   P1 (verb): mismatch > match    P2 (end): mismatch > match
TOKENS: dict[int, dict[str, list[list[float | None]]]] = {
    1: {"match": [[2, 3], [1], [4]], "mismatch": [[2, 3], [5], [6]]},  # P1 yes, P2 yes: pass
    2: {"match": [[1, 1], [2], [3]], "mismatch": [[1, 1], [6], [1]]},  # P1 yes, P2 no: fail
    3: {"match": [[None], [3], [2]], "mismatch": [[4], [2], [5]]},  # P1 no, P2 yes: fail
}
WORDS = {1: "dog", 2: "cat", 3: "cow"}


def suite_data(name: str = "three items") -> dict[str, Any]:
    items = {n: agreement_item(f"The {noun}") for n, noun in WORDS.items()}
    formulas = ["(2;%mismatch%) > (2;%match%)", "(3;%mismatch%) > (3;%match%)"]
    return suite_document(name, items, formulas, tags=["agreement"])


def store_done(
    model: LanguageModel, suite: Suite, tokens: dict[int, dict[str, Any]] = TOKENS
) -> Evaluation:
    """A done evaluation stored by the store task's own code (`results_store`) from
    `tokens`: token surprisals per item, condition and region, as a worker reports them."""
    snapshot = suite_selectors.suite_canonical(suite)
    scored = []
    for item_number, condition, _regions in formats.sentences(snapshot):
        regions = tokens[item_number][condition]
        flat = [t for region in regions for t in region]
        scored.append(
            {"regions": [region_metrics(r) for r in regions], "sentence": region_metrics(flat)}
        )
    evaluation = evaluation_create(
        model=model,
        suite=suite,
        content_hash=suite.content_hash,
        snapshot=snapshot,
        # As the request sets it, from the suite's own metric.
        metric=outcomes.prediction_metric(snapshot["meta"].get("metric")),
    )
    assert results_store(
        evaluation_id=evaluation.pk, attempt=evaluation.attempt, results={"sentences": scored}
    )
    return Evaluation.objects.get(pk=evaluation.pk)


@pytest.fixture
def evaluation() -> Evaluation:
    suite = suite_services.suite_import(source=suite_data(), owner=None).suite
    model = LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="hub/tiny")
    return store_done(model, suite)


def sums(condition: str, region: int) -> list[float]:
    """Region sums over items by hand, skipping missing values."""
    values = []
    for tokens in TOKENS.values():
        present = [t for t in tokens[condition][region - 1] if t is not None]
        if len(present) == len(tokens[condition][region - 1]):
            values.append(float(sum(present)))
    return values


def by_hand(values: list[float]) -> dict[str, float]:
    mean = sum(values) / len(values)
    sd = statistics.stdev(values)
    half = 1.96 * sd / math.sqrt(len(values))
    return {"y": mean, "yMin": mean - half, "yMax": mean + half, "n": len(values)}


def test_result_page_numbers(anon_client, evaluation) -> None:
    assert evaluation.accuracy == pytest.approx(1 / 3)
    response = anon_client.get(f"/evaluations/{evaluation.pk}/results/")
    assert response.status_code == 200
    page = response.content.decode()
    assert ">0.33</span>" in page
    assert "1 of 3 items pass every prediction" in page
    # Both predictions hold on 2 of 3 items.
    assert page.count(">0.67</td>") == 2 and page.count(">2 / 3</td>") == 2
    rows = re.findall(r'<tbody class="item[^"]*" data-item="(\d+)">(.*?)</tbody>', page, re.S)
    table = {int(n): re.findall(r"outcome-(pass|fail|na)", cells) for n, cells in rows}
    assert table == {
        1: ["pass", "pass", "pass"],
        2: ["pass", "fail", "fail"],
        3: ["fail", "pass", "fail"],
    }
    failing = anon_client.get(
        f"/evaluations/{evaluation.pk}/results/?items=failed"
    ).content.decode()
    shown = re.findall(r'<tbody class="item fail" data-item="(\d+)">', failing)
    assert shown == ["2", "3"]
    # The tabs say how many items each shows.
    assert ">All 3</a>" in page and ">Passing 1</a>" in page and ">Failing 2</a>" in page
    # Links to the model, the suite and both downloads.
    for href in ("/models/tiny-lm/", "/suites/three%20items/", "results.json", "results.csv"):
        assert href in page


def _snapshot_reads(client, url: str) -> list[str]:
    """The statements a GET of `url` sends that name the snapshots' table."""
    table = EvaluationSnapshot._meta.db_table
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return [q["sql"] for q in captured.captured_queries if table in q["sql"]]


def test_pages_read_the_snapshot_once_or_not_at_all(anon_client, evaluation) -> None:
    """The snapshot has a table of its own: the result page reads it in the query that
    reads the evaluation (no query more), the item page reads its one item by JSON path,
    and pages that list evaluations never read it."""
    evaluations = f'"{Evaluation._meta.db_table}"'
    (joined,) = _snapshot_reads(anon_client, f"/evaluations/{evaluation.pk}/results/")
    assert evaluations in joined, joined
    (item,) = _snapshot_reads(anon_client, f"/evaluations/{evaluation.pk}/items/1/")
    assert evaluations not in item, item
    assert _snapshot_reads(anon_client, "/leaderboard/") == []
    assert _snapshot_reads(anon_client, f"/models/{evaluation.model.name}/") == []
    assert _snapshot_reads(anon_client, "/runs/") == []


def test_accuracy_has_a_wilson_interval_on_its_evaluable_items(anon_client, evaluation) -> None:
    # 1 of 3 items passes. By hand (z = 1.96, z² = 3.8416, n = 3, p = 1/3): centre
    # (1/3 + 0.64027) / 2.28053 = 0.42692, half 1.96·√(0.07407 + 0.10671) / 2.28053
    # = 0.36543: (0.0615, 0.7923).
    expected = (0.0615, 0.7923)
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "<span data-accuracy-interval>95% interval 0.06–0.79</span>" in page
    results = anon_client.get(f"/api/evaluations/{evaluation.pk}/results/").json()["results"]
    assert (results["items_passed"], results["items_evaluated"]) == (1, 3)
    assert results["accuracy_interval"] == pytest.approx(expected, abs=1e-4)
    download = json.loads(anon_client.get(f"/evaluations/{evaluation.pk}/results.json").content)
    assert download["results"]["accuracy_interval"] == results["accuracy_interval"]
    # The model page lists it beside the accuracy, with the counts it is over.
    model_page = anon_client.get("/models/tiny-lm/").content.decode()
    assert re.search(r"data-interval>0\.06–0\.79 <span[^>]*>\(1/3\)", model_page)
    scores = selectors.model_scores(evaluation.model)
    assert scores.suites[0].interval == pytest.approx(expected, abs=1e-4)
    # And the suite page under its accuracy.
    suite_page = anon_client.get("/suites/three%20items/").content.decode()
    assert re.search(r"0\.33<span [^>]*data-interval[^>]*>0\.06–0\.79</span>", suite_page)


def test_not_evaluable_items_are_left_out_of_the_interval(anon_client) -> None:
    # Item 3 cannot be judged when its verb has no value: 1 of the 2 others passes.
    tokens: dict[int, dict[str, Any]] = {
        **TOKENS,
        3: {"match": [[4], [None], [2]], "mismatch": [[4], [2], [5]]},
    }
    suite = suite_services.suite_import(source=suite_data("two count"), owner=None).suite
    model = LanguageModel.objects.create(name="tiny-na", display_name="Tiny NA", source="hub/na")
    evaluation = store_done(model, suite, tokens)
    assert evaluation.accuracy == 0.5
    results = exports.results_document(evaluation)["results"]
    assert (results["items_passed"], results["items_evaluated"]) == (1, 2)
    # 1 of 2: centre (0.5 + 0.9604) / 2.9208 = 0.5, half 1.96·√(0.125 + 0.2401) / 2.9208
    # = 0.40545: (0.0945, 0.9055).
    assert results["accuracy_interval"] == pytest.approx((0.0945, 0.9055), abs=1e-4)
    assert selectors.result_page(evaluation).interval == pytest.approx((0.0945, 0.9055), abs=1e-4)


def test_plot_data_is_mean_and_95_interval_per_condition_and_region(
    anon_client, evaluation
) -> None:
    plot = selectors.result_page(evaluation).plot
    assert plot["regions"] == ["1 Subject", "2 Verb", "3 End"]
    assert plot["metric"] == "sum" and plot["unit"] == "bits"
    assert [s["condition"] for s in plot["series"]] == ["match", "mismatch"]
    for series in plot["series"]:
        for region, point in enumerate(series["points"], start=1):
            assert point == pytest.approx(by_hand(sums(series["condition"], region)))
    # The missing first-token value of item 3 is skipped, not counted as 0.
    match_subject = plot["series"][0]["points"][0]
    assert match_subject["n"] == 2 and match_subject["y"] == pytest.approx((5 + 2) / 2)
    assert match_subject["yMax"] - match_subject["y"] == pytest.approx(
        1.96 * statistics.stdev([5, 2]) / math.sqrt(2)
    )
    verb = plot["series"][0]["points"][1]
    assert verb["y"] == pytest.approx(2.0) and verb["yMin"] == pytest.approx(
        2 - 1.96 / math.sqrt(3)
    )

    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    embedded = re.search(
        r'<script id="plot-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert embedded and json.loads(embedded.group(1)) == json.loads(json.dumps(plot))
    assert '<canvas id="surprisal-plot"' in page


def test_plot_interval_of_one_value_has_zero_width() -> None:
    assert plots.interval([3.0]) == (3.0, 3.0, 3.0)
    assert plots.interval([]) is None


def test_plot_scripts_come_from_npm_packages(anon_client, evaluation) -> None:
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    scripts = re.findall(r'<script src="/static/([^"]+)"', page)
    assert scripts == [
        "vendor/chartjs/chart.umd.min.js",
        "vendor/chartjs-error-bars/index.umd.min.js",
        "js/result-plot.js",
    ]
    for path in scripts:
        assert finders.find(path), f"{path} is not served"
    found = finders.find("vendor/chartjs/chart.umd.min.js")
    assert isinstance(found, str) and "node_modules" in found


def _shape(region: dict[str, Any]) -> tuple[set[str], set[str]]:
    return set(region), set(region["metric_value"])


def test_results_json_follows_the_syntaxgym_results_format(anon_client, evaluation) -> None:
    response = anon_client.get(f"/evaluations/{evaluation.pk}/results.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert 'filename="three-items__tiny-lm.RESULTS.json"' in response["Content-Disposition"]
    document = json.loads(response.content)
    assert document["meta"]["model"] == "tiny-lm"
    assert document["meta"]["name"] == "three items" and document["meta"]["metric"] == "sum"
    assert document["region_meta"] == {"1": "Subject", "2": "Verb", "3": "End"}
    first = document["items"][0]["conditions"][1]["regions"][0]
    assert first == {
        "region_number": 1,
        "content": "The dog",
        "metric_value": {
            "sum": 5.0,
            "mean": 2.5,
            "median": 2.5,
            "range": 1.0,
            "max": 3.0,
            "min": 2.0,
        },
    }
    missing = document["items"][2]["conditions"][0]["regions"][0]["metric_value"]
    assert missing == dict.fromkeys(exports.METRICS)

    # The same keys at every level as SyntaxGym's own results files.
    references = sorted((SHARED_DATA / "syntaxgym-misc").glob("*.RESULTS.json"))
    if not references:
        pytest.skip("the shared SyntaxGym results files are not here")
    for path in references:
        reference = json.loads(path.read_text())
        assert set(reference) <= set(document)
        assert set(reference["meta"]) - {"author", "reference", "tags"} <= set(document["meta"])
        ref_item, item = reference["items"][0], document["items"][0]
        assert set(ref_item) == set(item)
        assert set(ref_item["conditions"][0]) == set(item["conditions"][0])
        assert _shape(ref_item["conditions"][0]["regions"][0]) == _shape(first)

    # And Gym reads it back as a results file of the very suite that was evaluated.
    again = formats.parse_suite_data(document)
    assert again.ok and again.source_format == formats.RESULTS
    assert again.suite is not None
    assert formats.content_hash(again.suite) == evaluation.content_hash


def test_results_api_is_the_same_document(anon_client, evaluation) -> None:
    api = anon_client.get(f"/api/evaluations/{evaluation.pk}/results/")
    assert api.status_code == 200
    download = json.loads(anon_client.get(f"/evaluations/{evaluation.pk}/results.json").content)
    assert api.json() == download == exports.results_document(evaluation)


def test_results_csv_rows(anon_client, evaluation) -> None:
    response = anon_client.get(f"/evaluations/{evaluation.pk}/results.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="three-items__tiny-lm.results.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "model", "suite", "item_number", "condition_name", "region_number", "region_name", "content",
        "sum", "mean", "median", "range", "max", "min",
    ]  # fmt: skip
    assert len(rows) == 1 + 3 * 2 * 3
    assert {(r[0], r[1]) for r in rows[1:]} == {("tiny-lm", "three items")}
    rows = [r[2:] for r in rows]
    assert rows[4] == [
        "1",
        "mismatch",
        "1",
        "Subject",
        "The dog",
        "5.0",
        "2.5",
        "2.5",
        "1.0",
        "3.0",
        "2.0",
    ]
    assert rows[5][:6] == ["1", "mismatch", "2", "Verb", "are", "5.0"]
    # Item 3's missing first value stays empty rather than 0.
    assert rows[13] == ["3", "match", "1", "Subject", "The cow", "", "", "", "", "", ""]


@pytest.mark.parametrize("status", ["queued", "running", "failed", "cancelled"])
def test_only_done_evaluations_have_result_pages(anon_client, evaluation, status) -> None:
    Evaluation.objects.filter(pk=evaluation.pk).update(status=status)
    for suffix in ("results/", "results.json", "results.csv"):
        assert anon_client.get(f"/evaluations/{evaluation.pk}/{suffix}").status_code == 404
    assert anon_client.get(f"/api/evaluations/{evaluation.pk}/results/").status_code == 404
    assert anon_client.get("/evaluations/999999/results/").status_code == 404


def test_outdated_result_page_is_kept_and_labelled(anon_client, evaluation) -> None:
    changed = suite_data()
    changed["items"][0]["conditions"][0]["regions"][2]["content"] = "there."
    suite_services.suite_import(source=changed, owner=None, replace=evaluation.suite)
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "Outdated:" in page and ">outdated</span>" in page
    # The page and the download keep the content that was evaluated.
    document = json.loads(anon_client.get(f"/evaluations/{evaluation.pk}/results.json").content)
    assert document["items"][0]["conditions"][0]["regions"][2]["content"] == "here."
    assert selectors.result_page(evaluation).outdated is True


def test_items_table_shows_sentences_and_region_values(anon_client, evaluation) -> None:
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/?items=failed").content.decode()
    item = re.search(r'data-item="2">(.*?)</tbody>', page, re.S)
    assert item
    rows = re.findall(r"<tr>(.*?)</tr>", item.group(1), re.S)
    cells = [
        [
            (text, value)
            for text, value in re.findall(
                r'<span class="region-text">(.*?)</span><span class="region-value">(.*?)</span>',
                row,
                re.S,
            )
        ]
        for row in rows
    ]
    # Item 2 (cat): match sums 2, 2, 3 and mismatch 2, 6, 1 bits.
    assert cells == [
        [("The cat", "2.00"), ("is", "2.00"), ("here.", "3.00")],
        [("The cat", "2.00"), ("are", "6.00"), ("here.", "1.00")],
    ]
    assert [search(r"<code>(\w+)</code>", r).group(1) for r in rows] == ["match", "mismatch"]
    # A missing value is a dash, not 0.
    third = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    item3 = re.search(r'data-item="3">(.*?)</tbody>', third, re.S)
    assert (
        item3
        and 'The cow</span><span class="region-value"><span class="muted" title="missing'
        in (item3.group(1))
    )


def test_suite_without_predictions_says_so(anon_client) -> None:
    data = suite_data("no predictions")
    data["predictions"] = []
    suite = suite_services.suite_import(source=data, owner=None).suite
    model = LanguageModel.objects.create(name="tiny-np", display_name="Tiny NP", source="hub/np")
    evaluation = store_done(model, suite)
    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "0 of 0" not in page and "Passing" not in page
    assert "no accuracy: this suite has no predictions (3 items scored)" in page
    assert "data-accuracy-interval" not in page
    results = exports.results_document(evaluation)["results"]
    assert results["accuracy_interval"] is None and results["items_evaluated"] == 0
    assert "data-no-predictions" in page
    assert len(re.findall(r'<span class="region-text">', page)) == 3 * 2 * 3


@pytest.mark.parametrize(("metric", "shown"), [("all", "sum"), (["mean", "sum"], "mean")])
def test_suite_page_and_result_page_name_the_same_metric(anon_client, metric, shown) -> None:
    data = suite_data("older format")
    data["meta"]["metric"] = metric
    suite = suite_services.suite_import(source=data, owner=None).suite
    model = LanguageModel.objects.create(name="tiny-m", display_name="Tiny M", source="hub/m")
    evaluation = store_done(model, suite)
    assert evaluation.metric == suite.prediction_metric == shown
    suite_page = anon_client.get(suite.get_absolute_url()).content.decode()
    described = re.search(r"<dd data-metric>(.*?)</dd>", suite_page, re.S)
    assert described and described.group(1).startswith(f"<code>{shown}</code> (bits)")
    assert f"({shown})." in suite_page and "(all)." not in suite_page
    result = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert f'<span class="value">{shown}</span>' in result
