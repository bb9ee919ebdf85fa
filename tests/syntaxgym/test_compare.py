"""Comparing models on a suite item by item (items where their prediction outcomes differ
first, region values side by side, counts), the links to it from the suite and result
pages, and the model page's model-vs-model scatter of suite accuracies. Results are stored
as the store task stores them (tests.syntaxgym.test_results_pages.store_done), without a model."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluations import statistics
from evaluations.models import Evaluation, LanguageModel
from evaluations.syntaxgym import comparisons
from evaluations.syntaxgym.services import evaluation_create
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.conftest import search
from tests.syntaxgym.test_results_pages import TOKENS, store_done, suite_data

pytestmark = pytest.mark.django_db

# Outcomes (P1 verb, P2 end) per item under each model's token surprisals:
#            item 1      item 2      item 3
#   A        (T, T)      (T, F)      (F, T)     TOKENS of the result page tests
#   B        (T, T)      (T, T)      (F, T)     item 2's mismatching end: 5 bits, not 1
#   C        (F, F)      (T, F)      (F, T)     item 1's mismatching verb 0.5, end 3
TOKENS_B = copy.deepcopy(TOKENS)
TOKENS_B[2]["mismatch"][2] = [5]
TOKENS_C = copy.deepcopy(TOKENS)
TOKENS_C[1]["mismatch"][1] = [0.5]
TOKENS_C[1]["mismatch"][2] = [3]


def model(name: str, **fields: Any) -> LanguageModel:
    fields.setdefault("display_name", f"Model {name[-1].upper()}")
    return LanguageModel.objects.create(name=name, source=f"hub/{name}", **fields)


def accuracy_only(model: LanguageModel, suite: Suite, accuracy: float) -> Evaluation:
    """A done evaluation known by its accuracy alone (no snapshot, no item rows), as the
    scatter and the leaderboard read it."""
    return evaluation_create(
        model=model,
        suite=suite,
        content_hash=suite.content_hash,
        snapshot={},
        status=Evaluation.Status.DONE,
        accuracy=accuracy,
    )


@pytest.fixture
def suite() -> Suite:
    return suite_services.suite_import(source=suite_data(), owner=None).suite


@pytest.fixture
def three(suite: Suite) -> dict[str, Evaluation]:
    return {
        "a": store_done(model("model-a"), suite),
        "b": store_done(model("model-b"), suite, TOKENS_B),
        "c": store_done(model("model-c"), suite, TOKENS_C),
    }


def url(suite: Suite, models: str, **extra: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"models": models, **extra}.items())
    return f"/suites/{suite.name.replace(' ', '%20')}/compare/?{query}"


def test_disagreements_first_with_counts_and_values(suite, three) -> None:
    result = comparisons.compare(suite, ["model-a", "model-b"])
    assert [(m.letter, m.model.name, m.evaluation_id) for m in result.models] == [
        ("A", "model-a", three["a"].pk),
        ("B", "model-b", three["b"].pk),
    ]
    # Item 2 is the one where an outcome differs (P2): it comes first, then suite order.
    assert [(i.item_number, i.disagree) for i in result.items] == [
        (2, True),
        (1, False),
        (3, False),
    ]
    item2 = result.items[0]
    assert item2.outcomes == [[True, True], [False, True]]
    assert item2.passed == [False, True]
    assert result.counts == [
        ("both pass", 1),
        ("both fail", 1),
        ("only A passes", 0),
        ("only B passes", 1),
    ]
    assert result.disagreements == 1
    # Region values side by side: the mismatching condition's end region is 1 vs 5 bits.
    mismatch = item2.conditions[1]
    assert mismatch.name == "mismatch"
    assert mismatch.regions == [("The cat", [2.0, 2.0]), ("are", [6.0, 6.0]), ("here.", [1.0, 5.0])]
    # Item 3's first region has no value under A (no BOS): missing, not 0.
    item3 = result.items[2]
    assert item3.conditions[0].regions[0] == ("The cow", [None, None])
    assert result.predictions == ["(2;%mismatch%) > (2;%match%)", "(3;%mismatch%) > (3;%match%)"]
    assert result.regions == [(1, "Subject"), (2, "Verb"), (3, "End")]


def test_three_models_counts_by_who_passes(suite, three) -> None:
    result = comparisons.compare(suite, ["model-a", "model-b", "model-c"])
    # Item 1: A and B pass, C fails; item 2: only B passes; item 3: all fail alike.
    assert [(i.item_number, i.passed) for i in result.items] == [
        (1, [True, True, False]),
        (2, [False, True, False]),
        (3, [False, False, False]),
    ]
    assert result.counts == [
        ("all pass", 0),
        ("all fail", 1),
        ("only A passes", 0),
        ("only B passes", 1),
        ("only C passes", 0),
        ("A and B pass", 1),
    ]
    assert result.disagreements == 2


def test_page_shows_models_counts_and_items(anon_client, suite, three) -> None:
    response = anon_client.get(url(suite, "model-a,model-b"))
    assert response.status_code == 200
    page = response.content.decode()
    for evaluation in (three["a"], three["b"]):
        assert f'href="/evaluations/{evaluation.pk}/results/"' in page
    assert 'href="/models/model-a/"' in page and 'href="/models/model-b/"' in page
    # Each item opens under each model in the item view.
    assert f'href="/evaluations/{three["b"].pk}/items/2/"' in page
    assert f'href="/evaluations/{three["a"].pk}/items/3/"' in page
    shown = re.findall(r'<tbody class="item( cmp-disagree)?" data-item="(\d+)">', page)
    assert shown == [(" cmp-disagree", "2"), ("", "1"), ("", "3")]
    assert page.index("The models disagree") < page.index("The models agree")
    counts = re.findall(r'<span class="value">(\d+)</span><span class="label">([^<]+)</span>', page)
    assert counts == [
        ("1", "both pass"),
        ("1", "both fail"),
        ("0", "only A passes"),
        ("1", "only B passes"),
    ]
    assert '<span class="value" data-disagreements>1</span>' in page
    # Both checkboxes of the picker are checked, C's is not.
    assert re.search(r'value="model-a" checked', page) and re.search(
        r'value="model-b" checked', page
    )
    assert re.search(r'value="model-c">', page)


def test_models_without_results_are_named_with_the_reason(anon_client, suite, three) -> None:
    model("model-d")  # registered, never run on the suite
    outdated = model("model-e")
    evaluation_create(
        model=outdated,
        suite=suite,
        content_hash="0" * 64,
        snapshot={},
        status=Evaluation.Status.DONE,
        accuracy=1.0,
    )
    result = comparisons.compare(suite, ["model-a", "model-d", "nobody", "model-e", "model-b"])
    assert [m.model.name for m in result.models] == ["model-a", "model-b"]
    assert result.left_out == [
        ("model-d", "no current result on this suite"),
        ("nobody", "no model has this name"),
        ("model-e", "no current result on this suite"),
    ]
    page = anon_client.get(url(suite, "model-a,model-d,nobody")).content.decode()
    assert "<strong>model-d</strong>: no current result on this suite" in page
    assert "<strong>nobody</strong>: no model has this name" in page
    # One model left: nothing to compare, and the page says what to do.
    assert "Pick two or more models" in page


def test_one_model_or_none_with_results(anon_client, suite) -> None:
    page = anon_client.get(url(suite, "")).content.decode()
    assert "No model has a result for this suite" in page
    only = store_done(model("model-a"), suite)
    page = anon_client.get(url(suite, "model-a")).content.decode()
    assert "Only one model has a result for this suite" in page
    assert f'href="/evaluations/{only.pk}/results/"' in page
    assert anon_client.get("/suites/no%20such/compare/?models=a,b").status_code == 404


def test_a_forms_repeated_models_become_one_parameter(anon_client, suite, three) -> None:
    response = anon_client.get(
        "/suites/three%20items/compare/?models=model-a&models=model-b&page=2"
    )
    assert response.status_code == 302
    assert response["Location"] == "/suites/three%20items/compare/?models=model-a,model-b"


def test_at_most_six_models_and_twenty_names(suite) -> None:
    for n in range(7):
        store_done(model(f"m{n}", display_name=f"M{n}"), suite)
    names = [f"m{n}" for n in range(7)] + [f"x{n}" for n in range(20)]
    result = comparisons.compare(suite, names)
    assert [m.letter for m in result.models] == list("ABCDEF")
    assert result.left_out[0] == ("7 more", "only 20 names are read")
    assert ("m6", "at most 6 models are compared at once") in result.left_out


def _big_suite(items: int, name: str) -> Suite:
    data = suite_data(name)
    template = data["items"]
    data["items"] = [
        {**copy.deepcopy(template[(n - 1) % 3]), "item_number": n} for n in range(1, items + 1)
    ]
    return suite_services.suite_import(source=data, owner=None).suite


def _tokens(items: int, base: dict[int, Any]) -> dict[int, Any]:
    return {n: base[(n - 1) % 3 + 1] for n in range(1, items + 1)}


def test_paged_with_a_fixed_number_of_queries(anon_client) -> None:
    a, b = model("model-a"), model("model-b")
    counts = []
    for items, name in ((3, "small"), (80, "large")):
        suite = _big_suite(items, name)
        store_done(a, suite, _tokens(items, TOKENS))
        store_done(b, suite, _tokens(items, TOKENS_B))
        with CaptureQueriesContext(connection) as queries:
            assert anon_client.get(url(suite, "model-a,model-b")).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    large = Suite.objects.get(name="large")
    first = comparisons.compare(large, ["model-a", "model-b"])
    assert first.page is not None
    assert first.page.paginator.num_pages == 4 and len(first.items) == comparisons.ITEMS_PER_PAGE
    # The 27 items like item 2 (2, 5, ... 80) disagree: all on page 1, then the rest.
    assert [i.item_number for i in first.items] == list(range(2, 78, 3))[:25]
    second = comparisons.compare(large, ["model-a", "model-b"], page=2)
    assert [i.item_number for i in second.items][:3] == [77, 80, 1]
    page = anon_client.get(url(large, "model-a,model-b", page="2")).content.decode()
    assert "Page 2 of 4" in page and "models=model-a%2Cmodel-b&amp;page=3" in page


@pytest.mark.parametrize(
    ("query", "status"),
    [
        # A NUL is refused by the request guard; the page reads the rest leniently (an
        # unknown model is named on the page, a page number out of range is the nearest).
        ("models=%00", 400),
        ("models=a,b&page=abc", 200),
        ("page=-3&models=model-a,model-b", 200),
        ("models=" + "x," * 500, 200),
    ],
)
def test_hostile_queries_are_answered(anon_client, suite, three, query: str, status: int) -> None:
    response = anon_client.get(f"/suites/three%20items/compare/?{query}")
    assert response.status_code == status


def test_suite_and_result_pages_link_to_the_comparison(anon_client, suite, three) -> None:
    page = anon_client.get("/suites/three%20items/").content.decode()
    assert 'action="/suites/three%20items/compare/"' in page
    boxes = re.findall(
        r'<input type="checkbox" name="models" value="([^"]+)" aria-label="[^"]+"( checked)?', page
    )
    # Best first (B passes 2 of 3 items, A and C 1 each: by name): the two best are checked.
    assert boxes == [("model-b", " checked"), ("model-a", " checked"), ("model-c", "")]
    result = anon_client.get(f"/evaluations/{three['a'].pk}/results/").content.decode()
    assert 'action="/suites/three%20items/compare/"' in result
    assert '<input type="hidden" name="models" value="model-a">' in result
    assert re.findall(r'<option value="(model-[a-z])">', result) == ["model-b", "model-c"]


# --- the model page's scatter ---------------------------------------------------------------


@pytest.fixture
def accuracies() -> dict[str, LanguageModel]:
    """x has s1..s3; y has s1, s2; z has s3 only; hidden h has all three."""
    suites = {}
    for name in ("s1", "s2", "s3"):
        data = suite_data(name)
        data["items"][0]["conditions"][0]["regions"][0]["content"] = f"The {name}"
        suites[name] = suite_services.suite_import(source=data, owner=None).suite
    made = {
        "x": model("model-x"),
        "y": model("model-y"),
        "z": model("model-z"),
        "h": model("model-h", is_hidden=True),
    }
    table = {
        "x": {"s1": 0.5, "s2": 1.0, "s3": 0.25},
        "y": {"s1": 0.75, "s2": 0.5},
        "z": {"s3": 1.0},
        "h": {"s1": 0.1, "s2": 0.2, "s3": 0.3},
    }
    for key, scores in table.items():
        for suite_name, accuracy in scores.items():
            accuracy_only(made[key], suites[suite_name], accuracy)
    return made


def test_scatter_points_over_shared_suites(accuracies) -> None:
    scatter = comparisons.model_scatter(accuracies["x"], "", include_hidden=False)
    # The other model sharing the most suites is the default; hidden ones only for staff.
    assert [(m.name, n) for m, n in scatter.choices] == [("model-y", 2), ("model-z", 1)]
    assert scatter.other is not None and scatter.other.name == "model-y"
    assert scatter.points == [
        {"suite": "s1", "x": 0.5, "y": 0.75, "url": "/suites/s1/compare/?models=model-x%2Cmodel-y"},
        {"suite": "s2", "x": 1.0, "y": 0.5, "url": "/suites/s2/compare/?models=model-x%2Cmodel-y"},
    ]
    z = comparisons.model_scatter(accuracies["x"], "model-z", include_hidden=False)
    assert [(p["suite"], p["x"], p["y"]) for p in z.points] == [("s3", 0.25, 1.0)]
    staff = comparisons.model_scatter(accuracies["x"], "", include_hidden=True)
    assert staff.other is not None and staff.other.name == "model-h"
    unknown = comparisons.model_scatter(accuracies["x"], "model-h", include_hidden=False)
    assert unknown.other is not None
    assert unknown.other.name == "model-y" and "'model-h' has no current results" in unknown.problem


def test_model_page_shows_the_scatter(anon_client, accuracies) -> None:
    page = anon_client.get("/models/model-x/?vs=model-z").content.decode()
    data = search(r'<script id="scatter-data" type="application/json">(.*?)</script>', page)
    assert json.loads(data.group(1)) == [
        {"suite": "s3", "x": 0.25, "y": 1.0, "url": "/suites/s3/compare/?models=model-x%2Cmodel-z"}
    ]
    assert '<option value="model-z" selected>' in page
    assert "Model Y (2 suites in common)" in page
    assert '<canvas id="model-scatter"' in page and "js/model-scatter.js" in page
    # Comparison links of the table below the plot.
    assert 'href="/suites/s3/compare/?models=model-x%2Cmodel-z"' in page
    alone = model("model-w")
    empty = anon_client.get(f"/models/{alone.name}/").content.decode()
    assert "data-scatter-empty" in empty and "model-scatter" not in empty


def test_scatter_reads_two_queries_whatever_the_size(accuracies, django_assert_num_queries) -> None:
    with django_assert_num_queries(2):
        small = comparisons.model_scatter(accuracies["x"], "", include_hidden=False)
    for n in range(5):
        extra = model(f"model-extra{n}", display_name=f"Extra {n}")
        for suite in Suite.objects.all():
            accuracy_only(extra, suite, 0.5)
    with django_assert_num_queries(2):
        large = comparisons.model_scatter(accuracies["x"], "model-extra3", include_hidden=False)
    assert len(small.choices) == 2 and len(large.choices) == 7
    assert [(p["suite"], p["y"]) for p in large.points] == [("s1", 0.5), ("s2", 0.5), ("s3", 0.5)]


def test_a_suite_without_predictions_compares_values_only(anon_client) -> None:
    data = suite_data("no predictions")
    data["predictions"] = []
    suite = suite_services.suite_import(source=data, owner=None).suite
    store_done(model("model-a"), suite)
    store_done(model("model-b"), suite, TOKENS_B)
    result = comparisons.compare(suite, ["model-a", "model-b"])
    assert result.predictions == [] and result.disagreements == 0
    assert [i.item_number for i in result.items] == [1, 2, 3]
    assert result.items[1].conditions[1].regions[2] == ("here.", [1.0, 5.0])
    page = anon_client.get("/suites/no%20predictions/compare/?models=model-a,model-b")
    text = page.content.decode()
    assert "data-no-predictions" in text and "Items by outcome" not in text
    assert "The models agree" not in text


def test_two_models_get_mcnemars_exact_test(anon_client, suite, three) -> None:
    # A and B disagree on item 2 only (B passes): b = 0, c = 1, p = 2 · 1/2 = 1.
    result = comparisons.compare(suite, ["model-a", "model-b"])
    test = result.paired
    assert test is not None
    assert (test.only_first, test.only_second, test.both_pass, test.both_fail) == (0, 1, 1, 1)
    assert test.p_value == 1.0 and not test.significant
    # Three models: no single paired test.
    assert comparisons.compare(suite, ["model-a", "model-b", "model-c"]).paired is None


def test_paired_test_on_the_page_and_in_the_api(anon_client) -> None:
    # 12 items: A passes 1, 11 and 12; B passes 2 to 12. So b = 1 (item 1), c = 9 (items
    # 2 to 10), and by hand p = 2 · (C(10,0) + C(10,1)) / 2^10 = 22/1024 = 0.021484375.
    suite = _big_suite(12, "twelve")
    passing, failing = TOKENS[1], TOKENS[2]
    store_done(
        model("model-a"), suite, {n: passing if n in (1, 11, 12) else failing for n in range(1, 13)}
    )
    store_done(model("model-b"), suite, {n: failing if n == 1 else passing for n in range(1, 13)})
    page = anon_client.get(url(suite, "model-a,model-b")).content.decode()
    # Each model's accuracy with its interval. A, 3 of 12 by hand: centre (0.25 + 0.16007)
    # / 1.32013 = 0.31063, half 1.96 · √(0.015625 + 0.006669) / 1.32013 = 0.22169, so
    # 0.09–0.53; B, 11 of 12, likewise 0.65–0.99.
    assert re.findall(r"data-interval>([^<]*)<", page) == ["0.09–0.53", "0.65–0.99"]
    assert "<strong data-only-first>1</strong>" in page
    assert "<strong data-only-second>9</strong>" in page
    assert "<strong data-p-value>p = 0.0215</strong>" in page and "the models differ" in page

    response = anon_client.get("/api/suites/twelve/compare/?models=model-a,model-b")
    assert response.status_code == 200
    body = response.json()
    assert [m["model"] for m in body["models"]] == ["model-a", "model-b"]
    assert body["models"][0]["accuracy_interval"] == pytest.approx(
        statistics.wilson_interval(3, 12), abs=1e-12
    )
    assert body["paired_test"] == {
        "method": "McNemar, exact, two-sided",
        "items": 12,
        "only_first": 1,
        "only_second": 9,
        "both_pass": 2,
        "both_fail": 0,
        "p_value": 0.021484375,
        "significant": True,
    }
    assert {c["label"]: c["items"] for c in body["counts"]}["only B passes"] == 9
    # Names in the other order swap the counts, not the p-value.
    swapped = anon_client.get("/api/suites/twelve/compare/?models=model-b,model-a").json()
    assert (swapped["paired_test"]["only_first"], swapped["paired_test"]["only_second"]) == (9, 1)
    assert swapped["paired_test"]["p_value"] == 0.021484375


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("models=%00", 400),
        ("models=model-a", 200),
        ("models=nobody,model-a", 200),
        ("models=" + "x," * 500, 200),
    ],
)
def test_comparison_api_answers_bad_queries(anon_client, suite, three, query, status) -> None:
    response = anon_client.get(f"/api/suites/three%20items/compare/?{query}")
    assert response.status_code == status
    if status == 200:
        assert response.json()["paired_test"] is None
    assert anon_client.get("/api/suites/nothing/compare/?models=a,b").status_code == 404


def test_comparison_api_without_models_compares_every_current_result(
    anon_client, suite, three
) -> None:
    for query in ("", "?models=", "?models=,"):
        body = anon_client.get(f"/api/suites/three%20items/compare/{query}").json()
        assert [m["model"] for m in body["models"]] == ["model-a", "model-b", "model-c"]
        assert body["paired_test"] is None
