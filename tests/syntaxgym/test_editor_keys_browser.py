"""The grid editor's keys and pastes in a real browser (Debian chromium through Playwright):
Home/End, Ctrl+Home/Ctrl+End, PageUp/PageDown and arrows move as in a spreadsheet; Enter
after a run of Tabs goes back to the column the run started in; characters typed on any
keyboard layout stay in the cell being edited; whole rows pasted on the "new item" row keep
their item and condition columns. Writes artifacts/editor-keys.png."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from suites.syntaxgym import services
from tests.browser import artifact, login, type_cells
from tests.conftest import small_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ITEMS = 40  # 80 rows: several pages of the grid
LAST_COLUMN = 4  # Item, Condition, then three regions


def long_suite(name: str) -> dict[str, Any]:
    suite = small_suite(name)
    template = suite["items"][0]
    suite["items"] = [
        {
            "item_number": n,
            "conditions": [
                {
                    "condition_name": c["condition_name"],
                    "regions": [
                        {**r, "content": f"{r['content']} {n}"} if r["region_number"] == 1 else r
                        for r in c["regions"]
                    ],
                }
                for c in template["conditions"]
            ],
        }
        for n in range(1, ITEMS + 1)
    ]
    return suite


def open_grid(page: Page, owner: Any, suite: dict[str, Any]) -> None:
    services.suite_import(source=suite, owner=owner)
    login(
        page, "alice", "alice-pass-1234", next_url=f"/suites/{quote(suite['meta']['name'])}/grid/"
    )
    expect(page.locator("#validation-summary")).to_have_text("No problems: the suite can be saved.")


def active(page: Page) -> tuple[int, int]:
    """(row, column) of the grid's active cell: row -1 is the "new item" row."""
    found = page.evaluate("() => window.gymEditor.activeCell()")
    return found["row"], found["column"]


def expect_active(page: Page, row: int, column: int) -> None:
    page.wait_for_function(
        "([row, column]) => { const a = window.gymEditor.activeCell();"
        " return a && a.row === row && a.column === column; }",
        arg=[row, column],
        timeout=3000,
    )


def click_cell(page: Page, row: int, column: int) -> None:
    page.locator(".ed-grid .tabulator-row").nth(row).locator(".tabulator-cell").nth(column).click()
    expect_active(page, row, column)


def cell_text(page: Page, row: int, column: int) -> str:
    return page.evaluate("([r, c]) => window.gymEditor.cellText(r, c)", [row, column])


def scroll_top(page: Page) -> float:
    return page.evaluate(
        "() => document.querySelector('.ed-grid .tabulator-tableholder').scrollTop"
    )


def visible_in_grid(page: Page) -> bool:
    """Whether the active cell comes to lie inside the grid's scrolled area."""
    try:
        page.wait_for_function(
            """() => {
                const holder = document.querySelector('.ed-grid .tabulator-tableholder');
                const cell = document.querySelector('.ed-grid .tabulator-range-cell-active');
                if (!cell) return false;
                const outer = holder.getBoundingClientRect();
                const box = cell.getBoundingClientRect();
                return box.top >= outer.top - 1 && box.bottom <= outer.bottom + 1;
            }""",
            timeout=3000,
        )
    except PlaywrightTimeout:
        return False
    return True


def test_spreadsheet_keys_move_the_cursor(page: Page, alice) -> None:
    open_grid(page, alice, long_suite("many items"))
    last_row = 2 * ITEMS - 1

    click_cell(page, 0, 3)
    page.keyboard.press("End")
    expect_active(page, 0, LAST_COLUMN)
    page.keyboard.press("Home")
    expect_active(page, 0, 0)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    expect_active(page, 1, 1)

    # PageDown moves by the rows that fit in the grid and scrolls them into view.
    page.keyboard.press("PageDown")
    page.wait_for_function("() => window.gymEditor.activeCell().row > 5")
    row, column = active(page)
    assert column == 1 and row < last_row
    assert scroll_top(page) > 0 and visible_in_grid(page)
    page.keyboard.press("PageDown")
    page.wait_for_function("([r]) => window.gymEditor.activeCell().row > r", arg=[row])
    assert visible_in_grid(page)
    page.keyboard.press("PageUp")
    expect_active(page, row, 1)
    page.keyboard.press("PageUp")
    expect_active(page, 1, 1)
    page.keyboard.press("PageUp")
    expect_active(page, 0, 1)
    assert scroll_top(page) == 0

    # Ctrl+End: the last cell of the last item (not the "new item" row); Ctrl+Home: the first.
    page.keyboard.press("Control+End")
    expect_active(page, last_row, LAST_COLUMN)
    assert visible_in_grid(page)
    page.keyboard.press("ArrowDown")
    expect_active(page, -1, LAST_COLUMN)
    page.keyboard.press("Control+Home")
    expect_active(page, 0, 0)
    assert scroll_top(page) == 0 and visible_in_grid(page)

    # Ctrl+arrows go to the edge: the last column, the last item row, and back.
    page.keyboard.press("Control+ArrowRight")
    expect_active(page, 0, LAST_COLUMN)
    page.keyboard.press("Control+ArrowDown")
    expect_active(page, last_row, LAST_COLUMN)
    page.keyboard.press("Control+ArrowLeft")
    expect_active(page, last_row, 0)
    page.keyboard.press("Control+ArrowUp")
    expect_active(page, 0, 0)

    # Shift+arrows select a block; an arrow alone collapses it again.
    click_cell(page, 2, 2)
    page.keyboard.press("Shift+ArrowDown")
    page.keyboard.press("Shift+ArrowRight")
    expect(page.locator(".ed-grid .tabulator-cell.tabulator-range-selected")).to_have_count(4)
    page.keyboard.press("ArrowLeft")
    expect_active(page, 2, 1)
    expect(page.locator(".ed-grid .tabulator-cell.tabulator-range-selected")).to_have_count(1)
    page.screenshot(path=artifact("editor-keys.png"), full_page=True)


def test_enter_after_tabs_returns_to_the_first_column_of_the_run(page: Page, alice) -> None:
    open_grid(page, alice, small_suite("tabs"))
    click_cell(page, 0, 2)
    type_cells(page, "The bird", "Tab", "sings", "Tab", "now.", "Enter")
    expect_active(page, 1, 2)
    assert [cell_text(page, 0, c) for c in (2, 3, 4)] == ["The bird", "sings", "now."]

    # A Tab past a cell without typing keeps the run; Enter with no run goes straight down.
    type_cells(page, "The birds", "Tab", "Tab", "today.", "Enter")
    expect_active(page, 2, 2)
    assert [cell_text(page, 1, c) for c in (2, 3, 4)] == ["The birds", "are", "today."]
    type_cells(page, "ArrowRight", "was", "Enter")
    expect_active(page, 3, 3)
    assert cell_text(page, 2, 3) == "was"


def azerty_key(page: Page, key: str, key_code: int, code: str) -> None:
    """A key as an AZERTY keyboard sends it: the character without Shift, with the key
    code of the key it sits on."""
    cdp = page.context.new_cdp_session(page)
    event = {"key": key, "code": code, "windowsVirtualKeyCode": key_code}
    cdp.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": key, **event})
    cdp.send("Input.dispatchKeyEvent", {"type": "keyUp", **event})
    cdp.detach()


def arrow_coded_key(page: Page, key: str) -> None:
    """A keydown for `key` that carries ArrowDown's key code (40) in keyCode and which."""
    page.evaluate(
        """(key) => {
            const event = new KeyboardEvent("keydown", {key, bubbles: true, cancelable: true});
            for (const name of ["keyCode", "which"]) Object.defineProperty(event, name, {value: 40});
            document.activeElement.dispatchEvent(event);
        }""",
        key,
    )


def test_typing_never_moves_the_cursor_on_any_layout(page: Page, alice) -> None:
    open_grid(page, alice, small_suite("azerty"))
    below = cell_text(page, 2, 2)
    editor = page.locator(".ed-grid .tabulator-cell input")

    # Editing a cell: "(" is 40 for Tabulator's key bindings, ArrowDown's key code, and
    # AZERTY types it without Shift; so are & ' " $ ! %, the codes of the other moves.
    click_cell(page, 1, 2)
    page.keyboard.press("F2")
    page.keyboard.press("Control+A")
    for key, key_code, code in (
        ("(", 53, "Digit5"),
        ("&", 49, "Digit1"),
        ("'", 52, "Digit4"),
        ('"', 51, "Digit3"),
        ("$", 186, "BracketRight"),
        ("!", 223, "Slash"),
        ("%", 192, "Quote"),
    ):
        azerty_key(page, key, key_code, code)
    arrow_coded_key(page, "(")
    expect(editor).to_have_count(1)
    page.keyboard.type("x)")
    expect_active(page, 1, 2)
    expect(editor).to_have_value("(&'\"$!%x)")
    page.keyboard.press("Enter")
    expect_active(page, 2, 2)
    assert cell_text(page, 1, 2) == "(&'\"$!%x)"
    assert cell_text(page, 2, 2) == below

    # On a selected cell, such a character starts editing there instead of moving.
    arrow_coded_key(page, "(")
    expect(editor).to_have_value("(")
    expect_active(page, 2, 2)
    page.keyboard.type("y")
    page.keyboard.press("Enter")
    expect_active(page, 3, 2)
    assert cell_text(page, 2, 2) == "(y"


PASTED_ROWS = [
    "item\tcondition\tSubject\tVerb\tEnd",
    "3\tmatch\tThe bird\tis\there.",
    "3\tmismatch\tThe bird\tare\there.",
    "4\tmatch\tThe birds\tare\there.",
    "4\tmismatch\tThe birds\tis\there.",
]


@pytest.mark.parametrize(
    "rows",
    [PASTED_ROWS, PASTED_ROWS[1:]],
    ids=["with a header row", "without a header row"],
)
def test_whole_rows_pasted_on_the_new_item_row_keep_items_and_conditions(
    page: Page, alice, rows: list[str]
) -> None:
    open_grid(page, alice, small_suite("pasted"))
    # "type or paste here": the first region of the "new item" row.
    page.locator(".ed-grid .tabulator-row.ghost-row .tabulator-cell").nth(2).click()
    page.evaluate("(text) => navigator.clipboard.writeText(text)", "\n".join(rows) + "\n")
    page.keyboard.press("Control+V")
    expect(page.locator("#ed-status")).to_contain_text("adding 2 items")
    suite = page.evaluate("() => window.gymEditor.suite()")
    added = suite["items"][2:]
    assert [item["item_number"] for item in added] == [3, 4]
    assert [[c["condition_name"] for c in item["conditions"]] for item in added] == [
        ["match", "mismatch"],
        ["match", "mismatch"],
    ]
    assert [r["content"] for r in added[1]["conditions"][1]["regions"]] == [
        "The birds",
        "is",
        "here.",
    ]
    expect(page.locator("#validation-summary")).to_have_text("No problems: the suite can be saved.")


# Every redraw of the grid takes 400 ms more, as on a slow machine: Tabulator is wrapped
# as its script defines it.
SLOW_REDRAWS = """
Object.defineProperty(window, "Tabulator", {
    configurable: true,
    get() { return this._slowTabulator; },
    set(value) {
        const replaceData = value.prototype.replaceData;
        value.prototype.replaceData = function (...args) {
            return new Promise((done) => setTimeout(done, 400)).then(() => replaceData.apply(this, args));
        };
        this._slowTabulator = value;
    },
});
"""


def test_keys_typed_during_a_redraw_wait_for_it(page: Page, alice) -> None:
    page.add_init_script(SLOW_REDRAWS)
    open_grid(page, alice, small_suite("slow"))
    # New item redraws the grid; what is typed at once goes to the new item's rows.
    page.get_by_role("button", name="New item").click()
    type_cells(page, "The bird", "Tab", "sings", "Enter", "The birds", "Tab", "sing", "Enter")
    expect_active(page, -1, 2)
    assert [cell_text(page, 4, c) for c in (0, 1, 2, 3)] == ["3", "match", "The bird", "sings"]
    assert [cell_text(page, 5, c) for c in (0, 1, 2, 3)] == ["3", "mismatch", "The birds", "sing"]

    # On the "new item" row, the first value adds an item (a redraw); the rest follows it.
    type_cells(page, "A cat", "Tab", "is", "Tab", "there.", "Enter")
    expect_active(page, 7, 2)
    assert [cell_text(page, 6, c) for c in range(5)] == ["4", "match", "A cat", "is", "there."]
    assert cell_text(page, 3, 2) == "The cat"  # the old rows kept their text


def test_the_paste_items_dialog_reads_the_same_layouts(page: Page, alice) -> None:
    open_grid(page, alice, small_suite("dialog"))
    dialog_text = page.get_by_label("Rows")
    page.get_by_role("button", name="Paste items…").click()
    dialog_text.fill("The bird\tis")
    page.get_by_role("button", name="Add items").click()
    expect(page.locator("#paste-error")).to_have_text(
        "Each row needs 3 region columns (optionally after item and condition columns);"
        " the widest row has 2."
    )
    # A header naming the regions, then the regions only: conditions follow the list.
    dialog_text.fill("Subject\tVerb\tEnd\nThe bird\tis\there.\nThe bird\tare\there.")
    page.get_by_role("button", name="Add items").click()
    expect(page.locator("#paste-dialog")).to_be_hidden()
    expect(page.locator("#ed-status")).to_contain_text("adding 1 item")
    suite = page.evaluate("() => window.gymEditor.suite()")
    added = suite["items"][2]
    assert added["item_number"] == 3
    assert [c["condition_name"] for c in added["conditions"]] == ["match", "mismatch"]
    assert [r["content"] for r in added["conditions"][1]["regions"]] == ["The bird", "are", "here."]
