/* Pasting into the grid, as into a spreadsheet: a block lands at the active cell, and
 * rows past the last one (or pasted on the "new item" row, or in the "Paste items"
 * dialog) become new items. Rows copied whole from a spreadsheet or an export keep
 * their item numbers and condition names in those columns, not in the regions. */

import { GHOST_ID } from "./context.js";
import { $, parseTSV } from "./dom.js";
import { activeCell, afterRender, columnFields, focusCell, rangeCells, renderGrid, rowById, setRowField } from "./grid.js";
import { ensureConditions, fieldOf, itemGroups, maxItemNumber, newRowId, state } from "./model.js";
import { renderConditions } from "./panels.js";
import { changed, setStatus } from "./undo.js";

const ITEM_HEADER = /^(item|item_number|item number|#)$/i;
const CONDITION_HEADER = /^(condition|condition_name|condition name)$/i;

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function isHeaderRow(values) {
  const cells = values.map((value) => value.trim().toLowerCase());
  if (ITEM_HEADER.test(cells[0]) || CONDITION_HEADER.test(cells[0])) return true;
  // A header naming the regions only: their names in order.
  const names = state.regions.map((region) => region.name.trim().toLowerCase());
  return names.length > 0 && names.every((name, i) => name !== "" && cells[i] === name);
}

/** Whether there are rows and every one passes `test`. */
function everyRow(rows, test) {
  return rows.length > 0 && rows.every(test);
}

/** The rows of a block pasted as new items, its header row dropped, and the column they
 * start at: Item when they carry item numbers and conditions (2 + regions columns, a
 * header "item", or a whole number then a known condition in each row), Condition when
 * they carry conditions, the first region when they hold the regions only; otherwise
 * `fallback` (the column the user pasted on, or null). */
export function newItemLayout(block, fallback) {
  const header = block.length > 0 && isHeaderRow(block[0]);
  const rows = header ? block.slice(1) : block;
  const regionCount = state.regions.length;
  const width = rows.length ? Math.max(...rows.map((values) => values.length)) : 0;
  const known = (text) => state.conditions.includes(String(text ?? "").trim());
  let field = fallback;
  if (header && ITEM_HEADER.test(block[0][0].trim())) field = "item";
  else if (header && CONDITION_HEADER.test(block[0][0].trim())) field = "cond";
  else if (width >= regionCount + 2) field = "item";
  else if (width === regionCount + 1) field = "cond";
  else if (width === regionCount && regionCount) field = fieldOf(state.regions[0].key);
  else if (everyRow(rows, (values) => /^\s*[+-]?\d+\s*$/.test(values[0]) && known(values[1]))) field = "item";
  else if (everyRow(rows, (values) => known(values[0]))) field = "cond";
  return { rows, field, header };
}

/** One value pasted on a larger selection fills the selection. */
function fillSelection(value, start) {
  const selected = rangeCells();
  for (const cell of selected) {
    const row = rowById(cell.getRow().getData().id);
    if (row) setRowField(row, cell.getField(), value);
  }
  finishPaste(start, `Filled ${selected.length} cells.`);
}

/** Write `block` from row index `row0` and column index `col0`, adding rows past the
 * end; returns how many rows were added. */
function writeRows(block, row0, col0) {
  const fields = columnFields();
  const width = Math.max(...block.map((values) => values.length));
  const conditionCount = Math.max(state.conditions.length, 1);
  const coversItem = col0 === 0;
  const coversCond = col0 <= 1 && col0 + width > 1;
  const nextNumber = maxItemNumber() + 1;
  let appended = 0;
  block.forEach((values, r) => {
    let row = state.rows[row0 + r];
    if (!row) {
      row = { id: newRowId(), item: "", cond: "", cells: {} };
      if (!coversItem) row.item = String(nextNumber + Math.floor(appended / conditionCount));
      if (!coversCond) row.cond = state.conditions[appended % conditionCount] ?? "";
      state.rows.push(row);
      appended += 1;
    }
    values.forEach((value, c) => {
      if (col0 + c < fields.length) setRowField(row, fields[col0 + c], value);
    });
  });
  return appended;
}

/** Paste a block at the active cell (or at `start`), as a spreadsheet does. Rows past
 * the last one become new items: numbered after the last item and given the conditions
 * in order, unless the block has item or condition columns. */
export function pasteBlock(block, start = activeCell()) {
  if (!start || !block.length) return;
  if (block.length === 1 && block[0].length === 1 && rangeCells().length > 1) {
    fillSelection(block[0][0], start);
    return;
  }
  const onNewItemRow = start.rowId === GHOST_ID;
  let header = false;
  let field = start.field;
  if (onNewItemRow) ({ rows: block, field, header } = newItemLayout(block, start.field));
  if (!block.length) return;
  const fields = columnFields();
  const col0 = Math.max(fields.indexOf(field), 0);
  const row0 = onNewItemRow ? state.rows.length : Math.max(state.rows.findIndex((r) => r.id === start.rowId), 0);
  const width = Math.max(...block.map((values) => values.length));
  const dropped = Math.max(0, col0 + width - fields.length);
  const appended = writeRows(block, row0, col0);
  ensureConditions(state.rows.map((row) => row.cond));
  renderConditions();
  const newItems = appended ? itemGroups(state.rows.slice(state.rows.length - appended)).length : 0;
  let message = `Pasted ${plural(block.length, "row")}`;
  if (newItems) message += `, adding ${plural(newItems, "item")}`;
  message += ".";
  if (header) message += " The header row was skipped.";
  if (dropped) message += ` ${plural(dropped, "column")} past the last region ignored.`;
  // On the "new item" row, the first pasted row now holds its place.
  finishPaste({ rowId: state.rows[row0].id, field }, message);
}

function finishPaste(focus, message) {
  renderGrid({ focus, takeFocus: true });
  changed();
  setStatus(message);
}

export function pasteItemsFromDialog() {
  const error = $("paste-error");
  const block = parseTSV($("paste-text").value).filter((values) => values.some((v) => v.trim() !== ""));
  const regionCount = state.regions.length;
  if (!block.length) {
    error.textContent = "Paste some rows first.";
    return;
  }
  if (!regionCount) {
    error.textContent = "Add the regions first: each pasted column after item and condition fills one region.";
    return;
  }
  const { rows, field } = newItemLayout(block, null);
  if (!field || !rows.length) {
    const width = rows.length ? Math.max(...rows.map((values) => values.length)) : 0;
    error.textContent = `Each row needs ${regionCount} region columns (optionally after item and condition columns); the widest row has ${width}.`;
    return;
  }
  error.textContent = "";
  const ghost = { rowId: GHOST_ID, field };
  afterRender(() => {
    focusCell(ghost, { takeFocus: false });
    pasteBlock(block, ghost);
  });
  $("paste-dialog").close();
  $("paste-text").value = "";
}
