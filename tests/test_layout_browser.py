"""A very long suite name or tag never makes a page wider than the window (a 400-character
tag once widened every page with a tag menu by thousands of pixels)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from evaluations.models import LanguageModel
from suites.models import Tag
from suites.syntaxgym import services
from tests.browser import artifact, login, overflow
from tests.conftest import small_suite
from tests.minimal_pairs.test_minimal_pair_pages import make_set, store_run
from tests.syntaxgym.test_item_view import store, suite_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_NAME = "Agreement" + "x" * 180 + " end"
# Longer than a tag may now be (40), as long as the database column holds: such a tag
# could exist from before the cap.
LONG_TAG = "t" * 64
SCORED_NAME = "Scored" + "y" * 180 + " end"


def test_long_names_and_tags_do_not_widen_pages(page, alice) -> None:
    suite = services.suite_import(source=small_suite(LONG_NAME), owner=alice).suite
    tag = Tag.objects.create(name=LONG_TAG)
    suite.tags.add(tag)
    # A long-named suite with results: on the leaderboard, its result and item pages.
    scored = store(suite_data(SCORED_NAME))
    scored.suite.tags.add(tag)
    page.set_viewport_size({"width": 720, "height": 800})
    login(page, "alice", "alice-pass-1234")
    for path in (
        "/",
        "/tags/",
        f"/tags/{LONG_TAG}/",
        f"/suites/{quote(LONG_NAME)}/",
        f"/suites/{quote(SCORED_NAME)}/",
        f"/suites/{quote(LONG_NAME)}/grid/",
        "/editor/",
        "/upload/",
        "/leaderboard/",
        f"/evaluations/{scored.pk}/results/",
        f"/evaluations/{scored.pk}/items/1/",
        f"/models/{scored.model.name}/",
        "/evaluations/new/",
        "/docs/predictions/",
    ):
        page.goto(path)
        assert page.locator("h1").first.is_visible()
        if "/grid/" in path or path == "/editor/":
            page.wait_for_selector(".ed-grid .tabulator-row")
        assert overflow(page) <= 0, f"{path} is {overflow(page)} px wider than the window"
    # The tag is still there in full for whoever hovers or follows it.
    page.goto("/")
    assert page.locator(f'a.tag[title="{LONG_TAG}"]').count() == 2
    page.goto(f"/suites/{quote(LONG_NAME)}/grid/")
    page.wait_for_selector(".ed-grid .tabulator-row")
    page.screenshot(path=artifact("layout-editor-long-name.png"), full_page=True)


def test_the_probing_length_plot_keeps_its_height(page, alice) -> None:
    """Chart.js with maintainAspectRatio off sizes a chart to its parent: a parent without
    a fixed height let the plot grow to thousands of pixels."""
    from suites.probing.services import probing_task_import

    lines = [
        f"{part}\t{label}\t{' '.join(['word'] * n)} ."
        for part in ("tr", "va", "te")
        for label, n in (("A", 5), ("B", 9))
    ]
    probing_task_import(source="\n".join(lines) + "\n", name="lengths", owner=alice)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/probing/lengths/")
    page.wait_for_function("() => document.querySelector('#length-plot').height > 0")
    height = page.evaluate(
        "() => document.querySelector('#length-plot').getBoundingClientRect().height"
    )
    assert 100 < height <= 400


# For every non-empty numeric cell (or header) that `scope` selects: its text and the
# most lines any one of its words-in-a-row (text node) takes.
NUMERIC_LINES = """scope => [...document.querySelectorAll(scope)].filter(
    cell => cell.textContent.trim()).map(cell => {
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let most = 0;
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        most = Math.max(most, tops.size);
      }
      return [cell.textContent.trim(), most];
    })"""


def test_numeric_column_headers_do_not_break_inside_a_word(page, alice) -> None:
    """Cells may break anywhere so a long name fits, but that let the suite list squeeze
    its Items/Conditions/Regions columns until the headers read "Ite ms", "Conditi ons",
    and the pair leaderboard's group means read "0.7 5"."""
    services.suite_import(source=small_suite("Agreement " * 12 + "end"), owner=alice)
    model = LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="t")
    store_run(model, make_set("pairs-" + "p" * 60, tags=["agreement"]))
    make_set("unscored-" + "q" * 60, tags=["agreement", "npi"])
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/")
    headers = page.evaluate(NUMERIC_LINES, "table.table thead th.num")
    assert [name for name, _ in headers] == ["Items", "Conditions", "Regions"]
    assert all(n == 1 for _, n in headers), headers
    page.goto("/leaderboard/")
    cells = page.evaluate(NUMERIC_LINES, "#minimal-pairs td.num")
    assert cells and all(n == 1 for _, n in cells), cells


# The words of the headers that `scope` selects which the browser split over two lines.
SPLIT_WORDS = """scope => {
  const split = [];
  for (const th of document.querySelectorAll(scope)) {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) split.push(match[0]);
      }
    }
  }
  return split;
}"""


def test_result_table_headers_do_not_break_inside_a_word(page) -> None:
    """The result page's item table squeezed its headers to "Ite m", "Subordinat e",
    "All prediction s" although the window had room for whole words."""
    long_region = [(word, 1.0) for word in "who wore a white lab jacket near the door".split()]
    words = {
        n: {
            condition: [[("The", 2.0), ("doctor", 3.0)], long_region, [(verb, 1.0), (".", 0.5)]]
            for condition, verb in (("match", "is"), ("mismatch", "are"))
        }
        for n in (1, 2)
    }
    evaluation = store(suite_data(words=words), words=words)
    page.set_viewport_size({"width": 900, "height": 900})
    page.goto(f"/evaluations/{evaluation.pk}/results/")
    assert page.locator("table th").count() > 5
    assert page.evaluate(SPLIT_WORDS, "table th") == []
    # A region name that is one long word still breaks rather than widen the page.
    data = suite_data("long region", words=words)
    data["region_meta"]["1"] = "Subject" + "s" * 190
    evaluation = store(data, words=words)
    page.goto(f"/evaluations/{evaluation.pk}/results/")
    assert overflow(page) <= 0
