"""The minimal-pair result page in a real browser: the accuracy chart draws one bar per
condition, the condition filter applies on choosing a condition, a click on a bar lists
that condition's pairs, and the page itself does not overflow sideways. Screenshots of
the result page, the leaderboard section and the model page go to the artifacts folder
for people to look at."""

from __future__ import annotations

import pytest

from evaluations.models import LanguageModel, PairEvaluation
from tests.browser import artifact
from tests.minimal_pairs.test_minimal_pair_pages import make_set, store_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_NAME = "subject-verb agreement across prepositional phrases and relative clauses (long)"


def test_chart_renders_and_condition_filter_works(page) -> None:
    model = LanguageModel.objects.create(
        name="tiny-lm", display_name="Tiny causal LM with a rather long display name", source="t"
    )
    run = store_run(model, make_set(LONG_NAME, copies=20, tags=["agreement"]))
    page.goto(f"/pairs/evaluations/{run.pk}/")
    page.wait_for_selector("#pair-plot[data-drawn='2']")
    box = page.locator("#pair-plot").bounding_box()
    assert box is not None and box["height"] > 200 and box["width"] > 400
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    page.screenshot(path=artifact("pair-result.png"), full_page=True)

    # Choosing a condition filters at once (no button press): only B's pairs are listed.
    page.select_option("#pair-cond", "2")
    page.wait_for_url("**cond=2**")
    conditions = page.locator("table.pair-results tbody td.small").all_inner_texts()
    assert conditions and set(conditions) == {"B"}
    assert page.locator("h2#h-pairs").inner_text().endswith("B")

    # A click on the first bar (condition A) lists A's pairs.
    page.goto(f"/pairs/evaluations/{run.pk}/")
    page.wait_for_selector("#pair-plot[data-drawn='2']")
    point = page.evaluate(
        """() => {
            const chart = Chart.getChart(document.getElementById('pair-plot'));
            const bar = chart.getDatasetMeta(0).data[0];
            return {x: bar.x, y: (bar.y + bar.base) / 2};
        }"""
    )
    page.locator("#pair-plot").click(position=point)
    page.wait_for_url("**cond=1**")
    conditions = page.locator("table.pair-results tbody td.small").all_inner_texts()
    assert set(conditions) == {"A"}

    page.goto("/leaderboard/#minimal-pairs")
    page.locator("#minimal-pairs").screenshot(path=artifact("pair-leaderboard.png"))
    page.goto(f"/models/{model.name}/")
    page.screenshot(path=artifact("pair-model-page.png"), full_page=True)


def test_a_running_run_shows_progress_then_an_empty_tab(page) -> None:
    model = LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="t")
    running = store_run(model, make_set("running set"), status=PairEvaluation.Status.RUNNING)
    page.goto(f"/pairs/evaluations/{running.pk}/")
    assert page.locator("progress[data-progress]").get_attribute("value") == "2"
    assert page.locator("#pair-plot").count() == 0
    page.screenshot(path=artifact("pair-running.png"), full_page=True)
    done = store_run(model, make_set("done set"))
    page.goto(f"/pairs/evaluations/{done.pk}/?show=ties")
    assert "No tied pairs" in page.locator("[data-no-pairs]").inner_text()
    page.goto(f"/minimal-pairs/{done.pair_set.name}/")
    assert page.locator(f'a[href="/pairs/evaluations/{done.pk}/"]').count() == 1
    page.screenshot(path=artifact("pair-set-page.png"), full_page=True)
