"""The result page's items table in a real browser: each item's conditions with their
sentences region by region and the region values, the tab counts, and no horizontal
overflow of the page itself (the table scrolls inside its own box)."""

from __future__ import annotations

import pytest

from evaluations.models import LanguageModel
from suites.syntaxgym import services as suite_services
from tests.browser import artifact
from tests.syntaxgym.test_results_pages import store_done, suite_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_items_table_shows_sentences_values_and_counts(page) -> None:
    suite = suite_services.suite_import(source=suite_data(), owner=None).suite
    model = LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="hub/t")
    evaluation = store_done(model, suite)
    page.goto(f"/evaluations/{evaluation.pk}/results/")
    tabs = page.locator("nav.segmented a").all_inner_texts()
    assert [t.strip() for t in tabs] == ["All 3", "Passing 1", "Failing 2"]
    item2 = page.locator('tbody[data-item="2"] tr')
    assert item2.count() == 2
    mismatch = item2.nth(1).locator("td.region-cell").all_inner_texts()
    assert [" ".join(t.split()) for t in mismatch] == ["The cat 2.00", "are 6.00", "here. 1.00"]
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"]
    page.locator("#h-items").scroll_into_view_if_needed()
    page.screenshot(path=artifact("result-items.png"), full_page=True)
    # The tab is a link: read the items once the failing page has loaded, not while the
    # browser is between the two pages (which reads none).
    with page.expect_navigation(url="**items=failed*"):
        page.click("text=Failing 2")
    shown = page.locator("tbody.item").evaluate_all("els => els.map(e => e.dataset.item)")
    assert shown == ["2", "3"]
