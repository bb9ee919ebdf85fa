"""A series' page in a real browser: the learning curves draw against the words seen of
BabyLM-named revisions (log axis), with no Content Security Policy violation."""

from __future__ import annotations

from pathlib import Path

import pytest

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
