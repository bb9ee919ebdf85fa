"""The item view in a real browser: from the result page's failing items to one item,
with many conditions, a long sentence and its tokens; the page itself never scrolls
sideways. Saves a screenshot to the test artifacts folder."""

from __future__ import annotations

import re

import pytest

from tests.browser import artifact, overflow
from tests.syntaxgym.test_item_view import store, suite_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_END = (
    "here in the middle of the enormous and crowded marketplace while the street musicians "
    "played their loudest songs until well after midnight."
)
CONDITIONS = ["match", "mismatch", "match_pp", "mismatch_pp", "mismatch_with_a_long_condition_name"]


def _words(item: int) -> dict[str, list[list[tuple[str, float | None]]]]:
    """Five conditions; item 2's mismatch verb is less surprising than its match verb."""
    words: dict[str, list[list[tuple[str, float | None]]]] = {}
    for index, condition in enumerate(CONDITIONS):
        verb = "are" if "mismatch" in condition else "is"
        verb_bits = 4.0 + index if item != 2 else 9.0 - index
        end: list[tuple[str, float | None]] = [
            (w, 1.0 + (len(w) * 7 + index) % 11) for w in LONG_END.split()
        ]
        words[condition] = [
            [("The", 2.5), ("senator", 11.25)],
            [(verb, verb_bits)],
            end if item == 2 else [("here.", 3.0)],
        ]
    return words


def test_a_failing_item_opens_from_the_items_table(page) -> None:
    words = {n: _words(n) for n in (1, 2, 3)}
    evaluation = store(suite_data("many conditions", words), words=words)
    page.goto(f"/evaluations/{evaluation.pk}/results/")
    page.get_by_role("link", name=re.compile(r"^Failing \d")).click()
    # evaluate_all does not wait: let the filtered page load before reading its rows.
    page.wait_for_url(re.compile(r"/results/\?items=failed$"))
    failing = page.locator("tbody.item").evaluate_all("els => els.map(e => e.dataset.item)")
    assert failing == ["2"]
    page.locator('tbody[data-item="2"] a[data-why]').click()
    page.wait_for_url(re.compile(rf"/evaluations/{evaluation.pk}/items/2/$"))

    assert " ".join(page.locator("h1").inner_text().split()) == "Item 2 ✗ fail"
    shown = page.locator("article.item-cond").evaluate_all(
        "els => els.map(e => e.dataset.condition)"
    )
    assert shown == CONDITIONS
    # The sentence reads as written, token by token, with no tokenizer marks.
    mismatch = page.locator('article[data-condition="mismatch"]')
    end = mismatch.locator('[data-region="3"] .region-words').inner_text()
    assert end.strip() == LONG_END and "Ġ" not in end
    token = mismatch.locator('[data-region="2"] .tok')
    assert token.get_attribute("title") == "“ are” · characters 11–15 · 8.00 bits"
    # The token table opens on demand.
    table = mismatch.locator("table.token-table")
    assert not table.is_visible()
    mismatch.locator("summary").click()
    assert table.is_visible() and table.locator("tbody tr").count() == 3 + len(LONG_END.split())
    first = page.locator('tr[data-prediction="0"]')
    assert " ".join(first.locator("td.sides").inner_text().split()) == "8.00 > 9.00"

    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"]
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=artifact("item-view.png"), full_page=True)
    page.get_by_role("link", name="item 3 →").click()
    page.wait_for_url(re.compile(r"/items/3/$"))


def test_long_names_and_words_do_not_widen_the_item_page(page) -> None:
    long_condition = "mismatch_" + "x" * 150
    long_word = "Supercalifragilistic" * 8
    words = {}
    for n in (1, 2):
        words[n] = _words(n)
        words[n][long_condition] = [[("The", 2.0), (long_word, 30.0)], [("are", 1.0)], [("x.", 1)]]
    data = suite_data("L" + "o" * 180 + "ng", words)
    data["region_meta"]["3"] = "End" + "y" * 150
    evaluation = store(data, words=words)
    page.set_viewport_size({"width": 720, "height": 800})
    page.goto(f"/evaluations/{evaluation.pk}/items/1/")
    page.locator(f'article[data-condition="{long_condition}"] summary').click()
    too_wide = overflow(page)
    assert too_wide <= 0, f"the item page is {too_wide} px wider than the window"
    page.evaluate("window.scrollTo(0, 0)")  # a sticky table head would stick mid-page
    page.screenshot(path=artifact("item-view-long-names.png"), full_page=True)
