"""In a real browser: the comparison page reached from the suite page's checkboxes, its
empty states, the model page's scatter (a click on a point opens the comparison), the
leaderboard's numbered columns with long names, and the region plot's markers and offsets.
Each page is checked for horizontal overflow and saved as a screenshot in the artifacts
folder."""

from __future__ import annotations

import copy
from urllib.parse import quote, unquote

import pytest

from evaluations.models import Evaluation, LanguageModel
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.browser import artifact, overflow
from tests.syntaxgym.test_compare import TOKENS_B, TOKENS_C, accuracy_only
from tests.syntaxgym.test_results_pages import TOKENS, store_done, suite_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_SUITE = "Subject-verb agreement across a prepositional phrase " + "x" * 120 + " end"
LONG_MODEL = "A model with a very long display name " + "y" * 100


def _model(name: str, display_name: str) -> LanguageModel:
    return LanguageModel.objects.create(name=name, display_name=display_name, source=f"hub/{name}")


def _suite(name: str) -> Suite:
    return suite_services.suite_import(source=suite_data(name), owner=None).suite


def test_compare_from_the_suite_page(page) -> None:
    suite = _suite(LONG_SUITE)
    store_done(_model("model-a", LONG_MODEL), suite)
    store_done(_model("model-b", "Model B"), suite, TOKENS_B)
    store_done(_model("model-c", "Model C"), suite, TOKENS_C)
    _model("model-d", "Model D")  # never run
    page.goto(f"/suites/{quote(LONG_SUITE)}/")
    page.get_by_role("button", name="Compare the checked models item by item").click()
    page.wait_for_url("**/compare/?models=*")
    assert unquote(page.url).endswith("?models=model-b,model-a")
    items = page.locator("tbody.item").evaluate_all("els => els.map(e => e.dataset.item)")
    assert items == ["2", "1", "3"]
    assert page.locator("tbody.cmp-disagree").count() == 1
    assert overflow(page) <= 0
    page.screenshot(path=artifact("compare.png"), full_page=True)

    # Three models, one of them without a result: it is named with the reason.
    page.goto(f"/suites/{quote(LONG_SUITE)}/compare/?models=model-a,model-b,model-c,model-d")
    assert page.locator(".cmp-left-out").inner_text().strip() == (
        "model-d: no current result on this suite"
    )
    assert page.locator("tbody.item").count() == 3
    assert overflow(page) <= 0
    page.screenshot(path=artifact("compare-three-models.png"), full_page=True)

    # From model C's result page, "Compare with…" another model.
    c = Evaluation.objects.get(model__name="model-c")
    page.goto(f"/evaluations/{c.pk}/results/")
    page.get_by_label("Compare with…").select_option("model-a")
    assert overflow(page) <= 0
    page.screenshot(path=artifact("result-compare-with.png"))
    page.locator("form.cmp-with").get_by_role("button", name="Compare").click()
    page.wait_for_url("**/compare/?models=*")
    assert unquote(page.url).endswith("?models=model-c,model-a")

    # Narrow window: the table scrolls in its own box, the page does not widen.
    page.set_viewport_size({"width": 720, "height": 900})
    page.goto(f"/suites/{quote(LONG_SUITE)}/compare/?models=model-a,model-b,model-c,model-d")
    assert overflow(page) <= 0
    page.screenshot(path=artifact("compare-narrow.png"), full_page=True)


def test_compare_empty_states(page) -> None:
    suite = _suite("lonely suite")
    page.goto("/suites/lonely%20suite/compare/?models=model-a,model-b")
    assert "No model has a result" in page.locator("[data-empty]").inner_text()
    page.screenshot(path=artifact("compare-no-results.png"), full_page=True)
    store_done(_model("model-a", "Model A"), suite)
    page.goto("/suites/lonely%20suite/compare/?models=model-a")
    assert "Only one model has a result" in page.locator("[data-empty]").inner_text()
    assert page.locator(".cmp-left-out").count() == 0
    page.screenshot(path=artifact("compare-one-model.png"), full_page=True)


def _scatter_data() -> None:
    target = _model("model-x", LONG_MODEL)
    for n, (mine, theirs) in enumerate([(0.25, 0.75), (0.5, 0.5), (1.0, 0.4)]):
        suite = _suite(f"suite {n} {'z' * 60 if n == 0 else ''}".strip())
        pairs = [(target, mine), (_model_once("model-y"), theirs)]
        if n:  # a second other model, on two of the three suites
            pairs.append((_model_once("model-w"), 1.0 - theirs))
        for model, accuracy in pairs:
            accuracy_only(model, suite, accuracy)


def _model_once(name: str) -> LanguageModel:
    found = LanguageModel.objects.filter(name=name).first()
    return found or _model(name, name.replace("-", " ").title())


def test_scatter_on_the_model_page(page) -> None:
    _scatter_data()
    page.goto("/models/model-x/")
    page.wait_for_function("() => document.querySelector('#model-scatter').dataset.ready === '3'")
    assert overflow(page) <= 0
    page.screenshot(path=artifact("model-scatter-page.png"), full_page=True)
    page.locator("section.scatter-section").screenshot(path=artifact("model-scatter.png"))
    # Hover shows the suite's name; a click opens the comparison of the two models there.
    point = page.evaluate(
        """() => {
          const canvas = document.querySelector('#model-scatter');
          const chart = Chart.getChart(canvas);
          const el = chart.getDatasetMeta(0).data[1];
          return {x: el.x, y: el.y};
        }"""
    )
    box = page.locator("#model-scatter").bounding_box()
    page.mouse.move(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_function(
        "() => Chart.getChart(document.querySelector('#model-scatter')).tooltip.opacity > 0"
    )
    title = page.evaluate(
        "() => Chart.getChart(document.querySelector('#model-scatter')).tooltip.title"
    )
    assert title == ["suite 1"]
    page.locator("section.scatter-section").screenshot(path=artifact("model-scatter-hover.png"))
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
    page.wait_for_url("**/suites/suite%201/compare/?models=model-x%2Cmodel-y")
    assert page.locator("table.cmp-models tbody tr").count() == 2

    # Choosing the other model redraws the scatter in place, without the Show button
    # and without leaving the page; the address names the model chosen.
    page.goto("/models/model-x/")
    page.wait_for_function("() => document.querySelector('#model-scatter').dataset.ready === '3'")
    page.evaluate("() => { window.stayed = true; }")
    page.locator("#scatter-vs").select_option("model-w")
    page.wait_for_function("() => document.querySelector('#model-scatter').dataset.ready === '2'")
    assert page.evaluate("() => window.stayed") is True
    assert page.url.endswith("/models/model-x/?vs=model-w#h-scatter")
    assert page.evaluate(
        "() => Chart.getChart(document.querySelector('#model-scatter')).data.datasets[0].data"
        ".map(p => [p.suite, p.y])"
    ) == [["suite 1", 0.5], ["suite 2", 0.6]]
    assert "Model W" in page.locator("section.scatter-section figcaption").inner_text()
    assert page.locator("#scatter-vs").evaluate("el => el === document.activeElement")
    page.locator("#scatter-vs").select_option("model-y")
    page.wait_for_function("() => document.querySelector('#model-scatter').dataset.ready === '3'")
    assert page.url.endswith("/models/model-x/?vs=model-y#h-scatter")
    assert page.locator("section.scatter-section").count() == 1
    page.locator("section.scatter-section").screenshot(path=artifact("model-scatter-redrawn.png"))

    alone = _model("model-alone", "Model Alone")
    page.goto(f"/models/{alone.name}/")
    assert page.locator("[data-scatter-empty]").is_visible()
    page.screenshot(path=artifact("model-scatter-empty.png"), full_page=True)


def test_leaderboard_long_names_and_like_for_like(page) -> None:
    long_suite = _suite(LONG_SUITE)
    short = _suite("short suite")
    a = _model("model-a", LONG_MODEL)
    b = _model("model-b", "Model B")
    for model, suite, accuracy in ((a, long_suite, 0.5), (a, short, 1.0), (b, short, 0.25)):
        accuracy_only(model, suite, accuracy)
    page.goto("/leaderboard/")
    assert "over 1 of 2 suites" in page.locator(".lb-compared").inner_text()
    legend = page.locator(".lb-names li a").all_inner_texts()
    assert [t.strip() for t in legend] == [LONG_SUITE, "short suite"]
    assert overflow(page) <= 0
    page.screenshot(path=artifact("leaderboard-like-for-like.png"), full_page=True)
    page.set_viewport_size({"width": 720, "height": 900})
    page.reload()
    assert overflow(page) <= 0
    page.screenshot(path=artifact("leaderboard-narrow.png"), full_page=True)


def test_region_plot_markers_offsets_and_gaps(page) -> None:
    suite = _suite("plot suite")
    # No value for the matching subject of any item (no BOS): that point is not drawn.
    tokens = copy.deepcopy(TOKENS)
    for item in tokens.values():
        item["match"][0] = [None]
    evaluation = store_done(_model("model-a", "Model A"), suite, tokens)
    page.goto(f"/evaluations/{evaluation.pk}/results/")
    page.wait_for_function("() => document.querySelector('#surprisal-plot').dataset.ready")
    drawn = page.evaluate(
        """() => {
          const chart = Chart.getChart(document.querySelector('#surprisal-plot'));
          const labels = chart.scales.x.getLabelItems().map(l => l.label);
          return chart.data.datasets.map((d, i) => ({
            labels: labels,
            style: d.pointStyle,
            xs: chart.getDatasetMeta(i).data.map(p => p.x),
            skipped: chart.getDatasetMeta(i).data.map(p => p.skip),
          }));
        }"""
    )
    assert drawn[0]["style"] != drawn[1]["style"]
    assert drawn[0]["labels"] == ["1 Subject", "2 Verb", "3 End"]
    # The same region's points of the two conditions sit apart.
    for match_x, mismatch_x in zip(drawn[0]["xs"], drawn[1]["xs"], strict=True):
        assert mismatch_x - match_x > 2
    assert drawn[0]["skipped"] == [True, False, False]
    assert drawn[1]["skipped"] == [False, False, False]
    page.locator("figure.plot-figure").screenshot(path=artifact("region-plot.png"))
