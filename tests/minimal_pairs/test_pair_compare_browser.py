"""In a real browser: two models compared on a minimal-pair set, reached from the set
page's link and its checkboxes, with long names; the page never widens past the window
and is saved as a screenshot in the artifacts folder."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest

from tests.browser import artifact, overflow
from tests.minimal_pairs.test_pair_compare import RIGHT, TIE, WRONG, make_set, model_named, run_on

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_SET = "Agreement across a relative clause " + "x" * 150 + " end"


def test_compare_two_models_on_a_pair_set(page, alice) -> None:
    pair_set = make_set(LONG_SET, 12, alice)
    long_model = model_named("model-a")
    long_model.display_name = "A model with a very long display name " + "y" * 100
    long_model.save()
    run_on(long_model, pair_set, [RIGHT] * 10 + [WRONG, WRONG])
    run_on(model_named("model-b"), pair_set, [RIGHT] * 3 + [WRONG] * 6 + [TIE, RIGHT, WRONG])

    page.goto(f"/minimal-pairs/{quote(LONG_SET)}/")
    page.locator("[data-compare-link]").click()
    page.wait_for_url("**/compare/")
    assert "Pick two models" in page.locator("[data-empty]").inner_text()
    page.get_by_label("model-b").check()
    page.get_by_label(long_model.display_name).check()
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/compare/?models=*")
    assert unquote(page.url).endswith("?models=model-a&models=model-b")
    assert page.locator("[data-only-first]").inner_text() == "7"
    assert page.locator("[data-only-second]").inner_text() == "1"
    assert page.locator("[data-p-value]").inner_text() == "p = 0.0703"
    assert overflow(page) <= 0
    page.screenshot(path=artifact("pair-compare.png"), full_page=True)

    page.set_viewport_size({"width": 720, "height": 900})
    page.reload()
    assert overflow(page) <= 0
    page.screenshot(path=artifact("pair-compare-narrow.png"), full_page=True)
