"""The grid editor in a real browser (Debian chromium through Playwright): build a suite by
typing and by pasting from a spreadsheet, fix a prediction the parser refuses, save, find
the suite on the browse page and download it; another user cannot save it, and anonymous
visitors are sent to log in. Writes artifacts/editor.png."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import FilePayload, Locator, Page, expect

from suites.models import Suite
from suites.syntaxgym import services
from tests.browser import artifact, login, type_cells
from tests.conftest import small_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME = "attractor agreement (grid)"
FORMULA = "(2;%ungrammatical%) > (2;%grammatical%)"
# Copied from a spreadsheet: item, condition, then one column per region.
PASTED = "3\tgrammatical\tThe cabinet\tis\there.\n3\tungrammatical\tThe cabinet\tare\there.\n"


def _region(contents: list[str]) -> list[dict[str, object]]:
    return [{"region_number": i + 1, "content": c} for i, c in enumerate(contents)]


def _item(number: int, grammatical: list[str], ungrammatical: list[str]) -> dict[str, object]:
    return {
        "item_number": number,
        "conditions": [
            {"condition_name": "grammatical", "regions": _region(grammatical)},
            {"condition_name": "ungrammatical", "regions": _region(ungrammatical)},
        ],
    }


EXPECTED: dict[str, Any] = {
    "meta": {
        "name": NAME,
        "metric": "sum",
        "description": "Number agreement across a prepositional phrase.",
        "reference": "Linzen et al. 2016",
        "tags": ["agreement", "attractors"],
    },
    "region_meta": {"1": "Subject", "2": "Verb", "3": "End"},
    "predictions": [{"type": "formula", "formula": FORMULA}],
    "items": [
        # The stray space typed after "here." in item 1 is stripped on save.
        _item(1, ["The key", "is", "here."], ["The key", "are", "here."]),
        _item(2, ["The keys", "are", "here."], ["The keys", "is", "here."]),
        _item(3, ["The cabinet", "is", "here."], ["The cabinet", "are", "here."]),
    ],
}


def cell(on: Page, row: int, column: int) -> Locator:
    """A grid cell by position: row 0 is the first item row; column 0 is Item."""
    return on.locator(".ed-grid .tabulator-row").nth(row).locator(".tabulator-cell").nth(column)


def expect_marked_column(on: Page, index: int, col: int) -> None:
    """The error mark sits over character `col` (1-based) of the formula's first line:
    the text area's border and padding (9 px), then col - 1 monospace characters."""
    mark = on.locator(f"#prediction-{index}-caret")
    expect(mark).to_be_visible()
    box = mark.bounding_box()
    area = on.locator(f"#prediction-{index}").bounding_box()
    assert box is not None and area is not None
    assert abs(box["x"] - (area["x"] + 9 + (col - 1) * box["width"])) < 1.5
    assert area["y"] < box["y"] < area["y"] + area["height"]


def test_build_save_find_and_download_a_suite(page: Page, alice) -> None:
    login(page, "alice", "alice-pass-1234", next_url="/editor/")
    page.get_by_label("Name").first.fill(NAME)
    page.get_by_label("Description").fill(EXPECTED["meta"]["description"])
    page.get_by_label("Reference").fill(EXPECTED["meta"]["reference"])
    page.get_by_label("Tags").fill("agreement, Attractors")

    for name in ("Subject", "Verb", "End"):
        page.get_by_role("button", name="Add region").click()
        page.keyboard.type(name)  # the new region's name field has the focus
    for name in ("grammatical", "ungrammatical"):
        page.get_by_role("button", name="Add condition").click()
        page.keyboard.type(name)
        page.keyboard.press("Enter")
    expect(page.locator(".ed-grid .tabulator-col-title")).to_have_text(
        ["Item", "Condition", "1 Subject", "2 Verb", "3 End"]
    )

    # Item 1, typed as in a spreadsheet: Tab moves right, Enter moves down to the column
    # where the run of Tabs started.
    page.get_by_role("button", name="New item").click()
    type_cells(page, "The key", "Tab", "is", "Tab", "here. ", "Enter")
    type_cells(page, "The key", "Tab", "are", "Tab", "here.", "Enter")
    expect(cell(page, 0, 4)).to_have_class(re.compile(r"\bcell-warn\b"))  # the stray space

    # Item 2: "New item" copies item 1, so only what differs is typed.
    page.get_by_role("button", name="New item").click()
    expect(cell(page, 2, 0)).to_have_text("2")
    type_cells(page, "The keys", "Tab", "are", "Enter", "The keys", "Tab", "is", "Enter")
    cell(page, 3, 3).click()
    # The preview shows the selected item's sentences as the scorer will build them.
    expect(page.locator("#preview .ed-sentence")).to_have_text(
        ["The keys are here.", "The keys is here."]
    )

    # Item 3: a block copied from a spreadsheet, pasted on the "new item" row.
    page.locator(".ed-grid .tabulator-row.ghost-row .tabulator-cell").first.click()
    page.evaluate("(text) => navigator.clipboard.writeText(text)", PASTED)
    page.keyboard.press("Control+V")
    expect(cell(page, 4, 2)).to_have_text("The cabinet")
    expect(cell(page, 5, 3)).to_have_text("are")
    expect(page.locator("#ed-status")).to_contain_text("adding 1 item")

    # A prediction built from the picker, then a reference with a typo.
    page.get_by_role("button", name="Add prediction").click()
    page.get_by_label("Region", exact=True).select_option("2")
    page.get_by_label("Condition", exact=True).select_option("ungrammatical")
    page.get_by_role("button", name="Insert reference").click()
    page.locator(".ed-op[data-op=' > ']").click()
    page.keyboard.type("(2;%grammaticl%)")
    status = page.locator("#prediction-0-status")
    # Column 27 is where the misspelt condition starts.
    expect(status).to_contain_text("col 27: condition 'grammaticl' does not exist")
    expect(status).to_contain_text("did you mean 'grammatical'?")
    expect_marked_column(page, 0, 27)

    # The server refuses the save with the importer's message; nothing is written.
    page.get_by_role("button", name="Save suite").click()
    expect(page.locator("#ed-status")).to_contain_text("Not saved")
    expect(page.locator("#validation-errors")).to_contain_text(
        "$.predictions[0].formula condition 'grammaticl' does not exist"
    )
    assert not Suite.objects.exists()

    page.locator("#prediction-0").fill(FORMULA)
    expect(status).to_contain_text("valid")
    expect(page.locator("#validation-summary")).to_have_text("No problems: the suite can be saved.")
    page.get_by_role("button", name="Save suite").click()
    expect(page.locator("#ed-status")).to_contain_text(f"Saved “{NAME}”: 3 items")
    suite = Suite.objects.get(name=NAME)
    assert suite.owner == alice

    # The saved suite, reopened in the editor: the screenshot for people to look at.
    page.goto(f"/suites/{NAME}/grid/")
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(7)  # 6 rows + "new item"
    expect(page.locator("#validation-summary")).to_have_text("No problems: the suite can be saved.")
    expect(page.locator("#prediction-0-status")).to_contain_text("valid")
    page.screenshot(path=artifact("editor.png"), full_page=True)

    page.goto("/")
    page.get_by_role("link", name=NAME).click()
    with page.expect_download() as info:
        page.get_by_role("link", name="Download JSON").click()
    downloaded = Path(info.value.path()).read_text(encoding="utf-8")
    assert json.loads(downloaded) == EXPECTED


def test_others_cannot_save_and_anonymous_visitors_log_in(page: Page, alice, bob) -> None:
    suite = services.suite_import(source=small_suite("alice's suite"), owner=alice).suite
    grid = "/suites/alice's suite/grid/"

    page.goto(grid)
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/suites/"))
    page.goto("/editor/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/editor/"))

    login(page, "bob", "bob-pass-1234", next_url=grid)
    expect(page.get_by_role("button", name="Save suite")).to_have_count(0)
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(4)  # no "new item" row
    cell(page, 0, 2).dblclick()
    expect(page.locator(".ed-grid .tabulator-cell input")).to_have_count(0)

    # Saving anyway, as the editor would, with bob's session and CSRF token.
    answer = page.evaluate(
        """async (url) => {
            const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
            const suite = window.gymEditor.suite();
            suite.items.pop();
            const response = await fetch(url, {method: "PUT", body: JSON.stringify(suite),
                headers: {"Content-Type": "application/json", "X-CSRFToken": token}});
            return response.status;
        }""",
        "/api/suites/alice's%20suite/",
    )
    assert answer == 403
    suite.refresh_from_db()
    assert suite.item_count == 2

    page.get_by_role("button", name="Copy to my suites").click()
    expect(page).to_have_url(
        re.compile(r"/suites/alice(%27|')s%20suite%20(\(|%28)copy(\)|%29)/grid/$")
    )
    expect(page.get_by_role("button", name="Save suite")).to_be_visible()
    copy = Suite.objects.get(name="alice's suite (copy)")
    assert copy.owner == bob and copy.content_hash == suite.content_hash


def test_import_restructure_undo_and_export_without_leaving_the_page(page: Page, alice) -> None:
    login(page, "alice", "alice-pass-1234", next_url="/editor/")
    headers = page.locator(".ed-grid .tabulator-col-title")
    formula = page.locator("#prediction-0")

    page.get_by_role("button", name="Import…").click()
    page.get_by_label("File (.json or .csv)").set_input_files(
        files=[
            FilePayload(
                name="suite.json",
                mimeType="application/json",
                buffer=json.dumps(small_suite("imported")).encode(),
            )
        ]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(5)  # 4 rows + "new item"
    expect(page.get_by_label("Name").first).to_have_value("imported")
    expect(formula).to_have_value("(2;%mismatch%) > (2;%match%)")

    # Moving a region renumbers the predictions; undo and redo cover structure too.
    page.get_by_role("button", name="Move region 2 right").click()
    expect(headers).to_have_text(["Item", "Condition", "1 Subject", "2 End", "3 Verb"])
    expect(formula).to_have_value("(3;%mismatch%) > (3;%match%)")
    page.keyboard.press("Control+Z")
    expect(headers).to_have_text(["Item", "Condition", "1 Subject", "2 Verb", "3 End"])
    expect(formula).to_have_value("(2;%mismatch%) > (2;%match%)")
    page.keyboard.press("Control+Y")
    expect(headers).to_have_text(["Item", "Condition", "1 Subject", "2 End", "3 Verb"])
    page.get_by_role("button", name="Undo").click()
    expect(headers).to_have_text(["Item", "Condition", "1 Subject", "2 Verb", "3 End"])

    # Renaming a condition renames it in every row and every formula.
    page.get_by_label("Name of condition 2").fill("plural")
    page.get_by_label("Name of condition 2").press("Enter")
    expect(formula).to_have_value("(2;%plural%) > (2;%match%)")
    expect(cell(page, 3, 1)).to_have_text("plural")

    cell(page, 2, 2).click()
    page.get_by_role("button", name="Delete item").click()
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(3)
    page.get_by_role("button", name="Undo").click()
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(5)

    with page.expect_download() as info:
        page.get_by_role("button", name="Export JSON").click()
    exported = json.loads(Path(info.value.path()).read_text(encoding="utf-8"))
    assert exported["predictions"] == [{"type": "formula", "formula": "(2;%plural%) > (2;%match%)"}]
    assert [c["condition_name"] for c in exported["items"][1]["conditions"]] == ["match", "plural"]
    with page.expect_download() as info:
        page.get_by_role("button", name="Export CSV").click()
    csv_text = Path(info.value.path()).read_text(encoding="utf-8")
    assert csv_text.startswith("item_number,condition_name,region_number,region_name,content")
    assert "2,plural,2,Verb,are" in csv_text

    # A CSV brings items and regions; the page keeps its details and predictions.
    page.get_by_role("button", name="Import…").click()
    page.get_by_label("File (.json or .csv)").set_input_files(
        files=[FilePayload(name="suite.csv", mimeType="text/csv", buffer=csv_text.encode())]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".ed-grid .tabulator-row")).to_have_count(5)
    expect(formula).to_have_value("(2;%plural%) > (2;%match%)")
    expect(page.locator("#validation-summary")).to_have_text("No problems: the suite can be saved.")
    assert not Suite.objects.exists()  # nothing is saved until "Save suite"


def test_long_formulas_show_in_full_with_their_underscores(page: Page, alice) -> None:
    source = small_suite("underscores")
    for item in source["items"]:
        for condition in item["conditions"]:
            condition["condition_name"] += "_sg"
    source["predictions"] = [{"type": "formula", "formula": "(2;%mismatch_sg%) > (2;%match_sg%)"}]
    services.suite_import(source=source, owner=alice)
    login(page, "alice", "alice-pass-1234", next_url="/suites/underscores/grid/")
    area = page.locator("#prediction-0")
    expect(page.locator("#prediction-0-status")).to_contain_text("valid")

    def metrics() -> dict[str, float]:
        return area.evaluate(
            """(el) => { const s = getComputedStyle(el);
                return {lineHeight: parseFloat(s.lineHeight), fontSize: parseFloat(s.fontSize),
                        client: el.clientHeight, scroll: el.scrollHeight,
                        clientWidth: el.clientWidth, scrollWidth: el.scrollWidth}; }"""
        )

    # Room below the baseline for "_" at the normal zoom, and nothing cut off.
    one_line = metrics()
    assert one_line["lineHeight"] >= 1.4 * one_line["fontSize"]
    assert one_line["scroll"] <= one_line["client"]

    # A long formula wraps and the box grows: all of it stays in view, no scrolling.
    parts = [f"({r};%mismatch_sg%) > ({r};%match_sg%)" for r in (1, 2, 3)] * 3
    area.fill(" & ".join(parts))
    expect(page.locator("#prediction-0-status")).to_contain_text("valid")
    long = metrics()
    assert long["client"] >= 3 * one_line["client"] - 30
    assert long["scroll"] <= long["client"] and long["scrollWidth"] <= long["clientWidth"]

    # An error on a later line is marked where it is.
    area.fill(" & ".join(parts) + " & (3;%mach_sg%) > 0")
    expect(page.locator("#prediction-0-status")).to_contain_text(
        "condition 'mach_sg' does not exist"
    )
    mark = page.locator("#prediction-0-caret")
    expect(mark).to_be_visible()
    box, outer = mark.bounding_box(), area.bounding_box()
    assert box is not None and outer is not None
    assert outer["y"] + outer["height"] / 2 < box["y"] < outer["y"] + outer["height"]
    page.locator(".ed-predictions").screenshot(path=artifact("editor-predictions.png"))
