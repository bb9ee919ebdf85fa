"""A series' page in a real browser: the learning curves draw against the words seen of
BabyLM-named revisions (log axis), with no Content Security Policy violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.models import LanguageModel
from evaluations.training import series as series_services
from suites.syntaxgym import services as suite_services
from tests.conftest import small_suite, suite_evaluation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_series_page_draws_its_curves(hub_standin: Path, page) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=None).suite
    made = series_services.series_register(
        name="babylm", source=str(hub_standin), revisions=["chck_1M", "chck_10M", "chck_100M"]
    )
    made.suites.add(suite)
    for member, accuracy in zip(made.members.order_by("position"), (0.4, 0.85, 0.9), strict=True):
        suite_evaluation(member.model, suite, status="done", accuracy=accuracy)
    page.goto("/series/babylm/")
    chart = page.locator("#learning-plot")
    drawn = chart.evaluate("c => window.Chart.getChart(c).data.datasets.map(d => d.data.length)")
    assert drawn[0] == 3
    assert chart.evaluate("c => window.Chart.getChart(c).scales.x.type") == "logarithmic"
    title = chart.evaluate("c => window.Chart.getChart(c).options.scales.x.title.text")
    assert title == "Words seen (log scale)"
    assert page.locator("td[data-age]").inner_text() == "10000000"


def test_seeds_draw_as_a_mean_with_a_band(hub_standin: Path, page) -> None:
    suite = suite_services.suite_import(source=small_suite("agree"), owner=None).suite
    for seed, accuracies in (("seed-1", (0.5, 0.9)), ("seed-2", (0.7, 0.8))):
        made = series_services.series_register(
            name=seed, source=str(hub_standin), pattern="step{N}", steps=[1000, 2000],
            tokens_per_step=10, group="seeds",
        )  # fmt: skip
        made.suites.add(suite)
        for member, accuracy in zip(made.members.order_by("position"), accuracies, strict=True):
            model = LanguageModel.objects.create(
                name=f"{seed}-{member.step}", display_name=seed, source=f"{seed}/{member.step}"
            )
            member.model = model
            member.save()
            suite_evaluation(model, suite, status="done", accuracy=accuracy)
    page.goto("/series/seed-1/")
    shown = page.locator("#learning-plot").evaluate(
        "c => window.Chart.getChart(c).data.datasets.map(d => [d.label, d.data.map(p => p.y)])"
    )
    by_label = dict(shown)
    assert by_label["agree (mean of 2 seeds)"] == pytest.approx([0.6, 0.85])
    assert by_label["agree: lowest seed"] == [0.5, 0.8]
    assert by_label["agree: highest seed"] == [0.7, 0.9]
    assert page.locator("td[data-seed-age]").inner_text() == "20000 [20000, 20000]"
