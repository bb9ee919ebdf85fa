/* The grid's keys, as in a spreadsheet. Every decision is made from `event.key` (the
 * character typed, or the key's name), never from key codes: Tabulator's key bindings
 * turn a typed character into a key code ("(" becomes 40, the code of ArrowDown), so on
 * a layout where "(" needs no Shift (AZERTY) typing it moved the cursor and sent the next
 * keys into another cell. Tabulator is therefore given no navigation binding at all
 * (grid.js, TABULATOR_KEYBINDINGS), and this module moves the cursor. */

import { GHOST_ID, editable } from "./context.js";
import { activeCell, activeCellComponent, afterRender, columnFields, gridHolder, pendingRenders, selectCells, startEditing, table } from "./grid.js";

const NAVIGATION = ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown"];

// A Shift+key selection: the cell it grows from and its moving end, valid while the
// grid's range is still the one these keys made (a click starts afresh).
let extent = null;
// A run of Tabs: the column it started in and the cell the last Tab reached. Enter
// there goes to the next row at the run's first column.
let tabRun = null;

function layout() {
  const rows = table.getRows("active").map((row) => row.getData().id);
  const fields = columnFields();
  const lastRow = rows.length - 1;
  // The last item row: Ctrl+End and Ctrl+ArrowDown stop there, above "new item".
  const lastItem = Math.max(rows[lastRow] === GHOST_ID ? lastRow - 1 : lastRow, 0);
  return { rows, fields, lastRow, lastItem, lastCol: fields.length - 1 };
}

const cellAt = (grid, at) => ({ rowId: grid.rows[at.r], field: grid.fields[at.c] });
const sameCell = (a, b) => Boolean(a && b) && a.rowId === b.rowId && a.field === b.field;

function edgesOf(a, b) {
  return [Math.min(a.r, b.r), Math.max(a.r, b.r), Math.min(a.c, b.c), Math.max(a.c, b.c)].join();
}

/** The selection as anchor and moving end, from the grid's range. */
function currentExtent() {
  const range = table.getRanges()[0];
  if (!range) return null;
  const top = range.getTopEdge();
  const left = range.getLeftEdge();
  const edges = [top, range.getBottomEdge(), left, range.getRightEdge()].join();
  if (extent && edgesOf(extent.anchor, extent.end) === edges) return extent;
  const at = { r: top, c: left };
  return { anchor: at, end: at };
}

/** How many rows a page holds: those that fit in the grid's window, less one, as a
 * spreadsheet keeps one row of context. The tallest row sets it (the first row of an
 * item has a thicker border), so that it does not change while scrolling. */
function pageRows() {
  const holder = gridHolder();
  const heights = Array.from(holder.querySelectorAll(".tabulator-row"), (row) => row.offsetHeight);
  const height = Math.max(...heights, 1);
  return { rows: Math.max(1, Math.floor(holder.clientHeight / height) - 1), height };
}

function destination(key, ctrl, from, grid) {
  const { r, c } = from;
  switch (key) {
    case "ArrowUp":
      return { r: ctrl ? 0 : Math.max(r - 1, 0), c };
    case "ArrowDown":
      if (ctrl) return { r: r < grid.lastItem ? grid.lastItem : grid.lastRow, c };
      return { r: Math.min(r + 1, grid.lastRow), c };
    case "ArrowLeft":
      return { r, c: ctrl ? 0 : Math.max(c - 1, 0) };
    case "ArrowRight":
      return { r, c: ctrl ? grid.lastCol : Math.min(c + 1, grid.lastCol) };
    case "Home":
      return ctrl ? { r: 0, c: 0 } : { r, c: 0 };
    case "End":
      return ctrl ? { r: grid.lastItem, c: grid.lastCol } : { r, c: grid.lastCol };
    case "PageUp":
      return { r: Math.max(r - pageRows().rows, 0), c };
    case "PageDown":
      return { r: Math.min(r + pageRows().rows, grid.lastRow), c };
  }
  return null;
}

/** Arrows, Home/End, PageUp/PageDown; with Shift they grow the selection, with Ctrl
 * they go to the edge of the grid. */
function navigate(key, { ctrl = false, shift = false } = {}) {
  const grid = layout();
  const now = currentExtent();
  if (!now) return;
  const from = shift ? now.end : now.anchor;
  const to = destination(key, ctrl, from, grid);
  if (!to) return;
  if (key === "PageUp" || key === "PageDown") {
    // Scroll by the rows moved, so that the cursor keeps its place on the screen.
    gridHolder().scrollTop += (to.r - from.r) * pageRows().height;
  }
  const anchor = shift ? now.anchor : to;
  extent = { anchor, end: to };
  tabRun = null;
  selectCells(cellAt(grid, anchor), cellAt(grid, to));
}

function tabDestination(from, grid, back) {
  let { r, c } = from;
  if (!back) {
    if (c < grid.lastCol) c += 1;
    else if (r < grid.lastRow) {
      // Past the last column, go on at the next row's first region (or condition).
      r += 1;
      c = Math.min(2, grid.lastCol);
    }
  } else if (c > 0) c -= 1;
  else if (r > 0) {
    r -= 1;
    c = grid.lastCol;
  }
  return { r, c };
}

/** Tab, Shift+Tab, Enter and Shift+Enter from the active cell. */
function step(key, back) {
  const grid = layout();
  const here = activeCell();
  if (!here) return;
  const from = { r: grid.rows.indexOf(here.rowId), c: grid.fields.indexOf(here.field) };
  let to;
  if (key === "Tab") {
    if (!tabRun || !sameCell(tabRun.at, here)) tabRun = { field: here.field };
    to = tabDestination(from, grid, back);
    tabRun.at = cellAt(grid, to);
  } else {
    const column = !back && tabRun && sameCell(tabRun.at, here) ? grid.fields.indexOf(tabRun.field) : from.c;
    to = { r: back ? Math.max(from.r - 1, 0) : Math.min(from.r + 1, grid.lastRow), c: column };
    tabRun = null;
  }
  extent = null;
  const target = cellAt(grid, to);
  selectCells(target, target);
}

/** A key press as the handlers below read it, kept apart from its event so that a key
 * that has to wait for a redraw can be handled later. */
function keyOf(event) {
  const altGraph = Boolean(event.getModifierState && event.getModifierState("AltGraph"));
  const ctrl = event.ctrlKey || event.metaKey;
  return {
    key: event.key,
    shift: event.shiftKey,
    ctrl,
    alt: event.altKey,
    // A key that types a character: AltGr combinations (Ctrl+Alt on Windows) type too.
    character: [...event.key].length === 1 && (altGraph || !(ctrl || event.altKey)),
  };
}

/** The keys that leave a cell's editor: save it (the editor saves on blur), then move
 * once the grid is redrawn. Other keys (Home, End, Left, Right) stay in the text. */
function editorMove(k) {
  if (k.alt || k.ctrl) return null;
  if (k.key === "Tab" || k.key === "Enter") return () => step(k.key, k.shift);
  if (["ArrowUp", "ArrowDown", "PageUp", "PageDown"].includes(k.key) && !k.shift) return () => navigate(k.key);
  return null;
}

function leaveEditor(input, move) {
  input.blur();
  afterRender(move);
}

/** The cell editor that is open, if any (it may not have the focus yet). */
function openEditor() {
  return gridHolder()?.querySelector(".tabulator-cell.tabulator-editing input, .tabulator-cell.tabulator-editing textarea") || null;
}

/** A key meant for an editor that did not have the focus when it was pressed. */
function editorKey(k, input) {
  input.focus();
  if (k.character) {
    input.setRangeText(k.key, input.selectionStart, input.selectionEnd, "end");
    return true;
  }
  if (k.key === "Backspace" && input.selectionStart > 0) {
    const start = input.selectionStart === input.selectionEnd ? input.selectionStart - 1 : input.selectionStart;
    input.setRangeText("", start, input.selectionEnd, "end");
    return true;
  }
  const move = editorMove(k);
  if (move) leaveEditor(input, move);
  return Boolean(move);
}

/** A key on the grid (not in an editor); true when handled. */
function gridKey(k) {
  const editor = openEditor();
  if (editor) return editorKey(k, editor);
  const cell = activeCellComponent();
  if (!cell) return false;
  if (k.key === "Tab" && !(k.ctrl || k.alt)) step("Tab", k.shift);
  else if (NAVIGATION.includes(k.key) && !k.alt) navigate(k.key, { ctrl: k.ctrl, shift: k.shift });
  else if (!editable) return false;
  // Typing on a selected cell replaces its content, as in a spreadsheet.
  else if (k.character) startEditing(cell, k.key);
  else if (k.key === "F2" || (k.key === "Enter" && !(k.ctrl || k.alt))) cell.edit(true);
  else return false;
  return true;
}

function take(event) {
  event.preventDefault();
  event.stopPropagation();
}

/** The grid's keydown listener (capture phase, so it runs before Tabulator's). */
export function onGridKeydown(event) {
  if (event.isComposing) return;
  const target = event.target;
  if (target.tagName === "INPUT" || target.tagName === "TEXTAREA") {
    const move = editorMove(keyOf(event));
    if (move) {
      take(event);
      leaveEditor(target, move);
    }
    return;
  }
  const k = keyOf(event);
  if ((pendingRenders() || waiting.length) && (k.character || NAVIGATION.includes(k.key) || ["Tab", "Enter", "F2"].includes(k.key))) {
    // The grid is being redrawn (after an edit, a move, a new item): the key waits, so
    // that it acts on the cell that will be active, not on the one before.
    take(event);
    waiting.push(k);
    if (waiting.length === 1) afterRender(drain);
    return;
  }
  if (gridKey(k)) take(event);
}

// Keys pressed while the grid was being redrawn, in order.
const waiting = [];

/** Handle the waiting keys; one that starts a redraw or a move (Tab, Enter, a new
 * item) makes the rest wait for it in turn. */
function drain() {
  while (waiting.length) {
    const before = pendingRenders();
    try {
      gridKey(waiting.shift());
    } catch (error) {
      console.error(error);
    }
    if (pendingRenders() > before && waiting.length) {
      afterRender(drain);
      return;
    }
  }
}
