/* The grid (Tabulator): one row per item and condition, regions as columns. Every edit,
 * paste or new item updates the model first; the grid is redrawn from it. */

import { GHOST_ID, editable, hooks } from "./context.js";
import { $, el, parseTSV } from "./dom.js";
import { ensureConditions, fieldOf, groupOfRow, itemGroups, keyOf, maxItemNumber, newRowId, state } from "./model.js";
import { changed, setStatus } from "./undo.js";


// Tabulator's navigation bindings (its defaults and those of range selection), all off;
// its copy binding (Ctrl+C) stays.
const TABULATOR_NAVIGATION = [
  "navPrev", "navNext", "navUp", "navDown", "navLeft", "navRight",
  "scrollPageUp", "scrollPageDown", "scrollToStart", "scrollToEnd",
  ...["Jump", "Expand", "ExpandJump"].flatMap((kind) => ["Up", "Down", "Left", "Right"].map((way) => `range${kind}${way}`)),
];
const TABULATOR_KEYBINDINGS = Object.fromEntries(TABULATOR_NAVIGATION.map((name) => [name, false]));

const gridEl = $("grid");
export let table = null;
let tableBuilt = false;
let renderChain = Promise.resolve();
// Problems the server found, by cell: "rowId|field" -> messages.
export const cellProblems = new Map();

function gridRows() {
  const out = [];
  let odd = true;
  for (const group of itemGroups()) {
    odd = !odd;
    group.rows.forEach((row, i) => {
      const data = { id: row.id, item: row.item, cond: row.cond, _first: i === 0, _odd: odd };
      for (const region of state.regions) data[fieldOf(region.key)] = row.cells[region.key] ?? "";
      out.push(data);
    });
  }
  if (editable) {
    const ghost = { id: GHOST_ID, item: "", cond: "", _ghost: true, _odd: !odd };
    for (const region of state.regions) ghost[fieldOf(region.key)] = "";
    out.push(ghost);
  }
  return out;
}

export function columnFields() {
  return ["item", "cond", ...state.regions.map((region) => fieldOf(region.key))];
}

function decorateCell(cell, { stray = false } = {}) {
  const data = cell.getRow().getData();
  const element = cell.getElement();
  const value = String(cell.getValue() ?? "");
  // While Tabulator holds redraws (clearing a range), a cell may have no element yet;
  // an exception here would leave the grid blocked.
  if (!element) return { data, value };
  const problems = data._ghost ? null : cellProblems.get(`${data.id}|${cell.getField()}`);
  const strayNote = stray && !data._ghost && value !== value.trim();
  element.classList.toggle("cell-error", Boolean(problems));
  element.classList.toggle("cell-warn", !problems && strayNote);
  element.classList.toggle("cell-blank", !data._ghost && value === "");
  const notes = [];
  if (problems) notes.push(...problems);
  if (strayNote) notes.push("leading/trailing spaces: they are removed when the suite is saved");
  if (notes.length) element.setAttribute("title", notes.join("\n"));
  else if (value.length > 24) element.setAttribute("title", value);
  else element.removeAttribute("title");
  if (problems) element.setAttribute("aria-invalid", "true");
  else element.removeAttribute("aria-invalid");
  return { data, value };
}

/** Cell text as a text node (never HTML), with stray spaces made visible. */
function contentNode(value) {
  const match = value.match(/^(\s*)(.*?)(\s*)$/s);
  if (!match || (match[1] === "" && match[3] === "")) return document.createTextNode(value);
  const mark = (spaces) => (spaces ? el("span", { class: "ws", "aria-hidden": "true" }, "␣".repeat(spaces.length)) : null);
  return el("span", {}, mark(match[1]), match[2], mark(match[3]));
}

function itemFormatter(cell) {
  const { data, value } = decorateCell(cell);
  if (data._ghost) return el("span", { class: "ghost-text" }, "+");
  cell.getElement()?.classList.toggle("item-cont", !data._first);
  return document.createTextNode(value);
}

function condFormatter(cell) {
  const { data, value } = decorateCell(cell);
  if (data._ghost) return el("span", { class: "ghost-text" }, "new item");
  return contentNode(value);
}

function regionFormatter(cell) {
  const { data, value } = decorateCell(cell, { stray: true });
  if (data._ghost) {
    const first = state.regions.length && cell.getField() === fieldOf(state.regions[0].key);
    return first ? el("span", { class: "ghost-text" }, "type or paste here to add items") : "";
  }
  return contentNode(value);
}

export function regionTitle(index) {
  return () => {
    const region = state.regions[index];
    return el(
      "span",
      { class: "col-title" },
      el("span", { class: "rnum" }, String(index + 1)),
      " ",
      region && region.name ? region.name : el("em", { class: "muted" }, "unnamed"),
    );
  };
}

function gridColumns() {
  const editor = editable ? "input" : undefined;
  const columns = [
    {
      title: "Item",
      field: "item",
      editor,
      formatter: itemFormatter,
      width: 70,
      hozAlign: "right",
      cssClass: "col-item",
    },
    { title: "Condition", field: "cond", editor, formatter: condFormatter, minWidth: 130, widthGrow: 0.7, cssClass: "col-cond" },
  ];
  state.regions.forEach((region, i) => {
    columns.push({
      title: `${i + 1} ${region.name}`,
      titleFormatter: regionTitle(i),
      field: fieldOf(region.key),
      editor,
      formatter: regionFormatter,
      minWidth: 110,
    });
  });
  return columns;
}

function rowFormatter(row) {
  const data = row.getData();
  const element = row.getElement();
  element.classList.toggle("item-start", Boolean(data._first));
  element.classList.toggle("item-odd", Boolean(data._odd));
  element.classList.toggle("ghost-row", Boolean(data._ghost));
}

export function activeCellComponent() {
  if (!table || !tableBuilt) return null;
  try {
    const ranges = table.getRanges();
    if (!ranges.length) return null;
    // Row-major, [[cell, ...], ...]: the top-left cell is where a paste lands.
    const cells = ranges[0].getCells();
    return (Array.isArray(cells[0]) ? cells[0][0] : cells[0]) || null;
  } catch (_) {
    // Not built yet, or the range points at rows that were just replaced.
    return null;
  }
}

export function activeCell() {
  const cell = activeCellComponent();
  if (!cell) return null;
  return { rowId: cell.getRow().getData().id, field: cell.getField() };
}

export function rangeCells() {
  if (!table) return [];
  const ranges = table.getRanges();
  if (!ranges.length) return [];
  const cells = ranges[0].getCells();
  return Array.isArray(cells[0]) ? cells.flat() : cells;
}

export function gridHolder() {
  return gridEl.querySelector(".tabulator-tableholder");
}

function cellComponent(target) {
  // The row may be gone (undo, delete); then the grid keeps its default cell.
  if (!target || (target.rowId === GHOST_ID ? !editable : !rowById(target.rowId))) return null;
  const row = table.getRow(target.rowId);
  if (!row) return null;
  return row.getCell(target.field) || row.getCells()[0] || null;
}

/** Select the block from `anchor` to `end` (one cell when they are the same) and
 * scroll `end` into view. */
export function selectCells(anchor, end, { takeFocus = true } = {}) {
  if (!table) return;
  const last = cellComponent(end);
  const first = cellComponent(anchor) || last;
  if (!last) return;
  const ranges = table.getRanges();
  if (ranges.length) ranges[0].setBounds(first, last);
  else table.addRange(first, last);
  if (takeFocus) gridHolder()?.focus({ preventScroll: true });
  // A row far from the view has no element until the scroll has drawn it.
  table
    .scrollToRow(last.getRow(), "nearest", false)
    .catch(() => {})
    .then(() => {
      const element = last.getElement();
      if (takeFocus && element instanceof Element) element.scrollIntoView({ block: "nearest", inline: "nearest" });
    });
  hooks.schedulePreview();
}

export function focusCell(target, options = {}) {
  selectCells(target, target, options);
}

// Redraws and moves run one after another; keys that reach the grid meanwhile wait for
// them (see keys.js), so that they act on the cell that will be active.
let pendingSteps = 0;

function chain(step) {
  pendingSteps += 1;
  renderChain = renderChain
    .then(step)
    .catch((error) => console.error(error))
    .finally(() => {
      pendingSteps -= 1;
    });
  return renderChain;
}

/** How many redraws and moves are still to run (or running). */
export const pendingRenders = () => pendingSteps;

/** Run `action` once the grid has been redrawn from the model. */
export function afterRender(action) {
  return chain(action);
}

/** Redraw the rows from the model, keeping (or moving) the active cell. */
export function renderGrid({ focus = undefined, takeFocus = false } = {}) {
  const keep = focus === undefined ? activeCell() : focus;
  // The grid takes the focus at once (from a button, say), so that keys typed during
  // the redraw reach it and wait for it.
  if (takeFocus) gridHolder()?.focus({ preventScroll: true });
  return chain(async () => {
    await table.replaceData(gridRows());
    if (keep) focusCell(keep, { takeFocus });
    updateEmptyState();
  });
}

export function renderColumns(options = {}) {
  const keep = options.focus === undefined ? activeCell() : options.focus;
  chain(() => table.setColumns(gridColumns()));
  return renderGrid({ ...options, focus: keep });
}

/** Refresh a row's problem marks without redrawing its cells: a redraw would close an
 * editor open in the row, and lose what is being typed. */
export function redecorateRow(rowId) {
  const row = table?.getRow(rowId);
  if (!row) return;
  for (const cell of row.getCells()) decorateCell(cell, { stray: cell.getField().startsWith("f_") });
}

export function updateEmptyState() {
  const box = $("grid-empty");
  box.replaceChildren();
  if (state.rows.length) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  if (!editable) {
    box.append("This suite has no items.");
    return;
  }
  const steps = [];
  if (!state.regions.length) steps.push("add regions (the grid's columns, e.g. Subject, Verb, End)");
  if (!state.conditions.length) steps.push("add conditions (e.g. grammatical, ungrammatical)");
  steps.push("click New item and type, or paste rows from a spreadsheet on the new item row");
  box.append(el("strong", {}, "No items yet. "), "To start: ", steps.join("; then "), ".");
}

export function rowById(id) {
  return state.rows.find((row) => row.id === id) || null;
}

export function setRowField(row, field, value) {
  const text = String(value ?? "");
  if (field === "item") row.item = text.trim();
  else if (field === "cond") row.cond = text.trim();
  else row.cells[keyOf(field)] = text;
}

function onCellEdited(cell) {
  const data = cell.getRow().getData();
  const field = cell.getField();
  const value = String(cell.getValue() ?? "");
  if (data._ghost) {
    if (value !== "") addItemFromGhost(field, value);
    return;
  }
  const row = rowById(data.id);
  if (!row) return;
  if (field === "item") {
    // The item number belongs to the whole item: renumber all its rows.
    const group = groupOfRow(row.id);
    for (const member of group ? group.rows : [row]) member.item = value.trim();
    renderGrid();
  } else if (field === "cond") {
    setRowField(row, field, value);
    if (ensureConditions([row.cond])) hooks.renderConditions();
    if (row.cond !== value) renderGrid();
  } else {
    // The cell has re-run its formatter already; reformatting the row here would
    // rebuild cells that a range clear is still writing to.
    setRowField(row, field, value);
  }
  changed();
}

function addItemFromGhost(field, value) {
  const number = String(maxItemNumber() + 1);
  const names = state.conditions.length ? state.conditions : [""];
  const rows = names.map((name) => ({ id: newRowId(), item: number, cond: name, cells: {} }));
  setRowField(rows[0], field, value);
  if (field === "item") for (const row of rows) row.item = rows[0].item;
  state.rows.push(...rows);
  ensureConditions([rows[0].cond]);
  hooks.renderConditions();
  renderGrid({ focus: { rowId: rows[0].id, field }, takeFocus: true });
  changed();
}

export function flushEditor() {
  const input = gridEl.querySelector(".tabulator-cell input, .tabulator-cell textarea");
  if (input) input.blur();
}

export function startEditing(cell, text) {
  cell.edit(true);
  const input = cell.getElement().querySelector("input");
  if (input) {
    input.value = text;
    input.setSelectionRange(text.length, text.length);
  }
}

export function buildTable() {
  table = new Tabulator(gridEl, {
    data: gridRows(),
    columns: gridColumns(),
    index: "id",
    layout: "fitColumns",
    maxHeight: "62vh",
    placeholder: "No items yet",
    columnDefaults: { headerSort: false, resizable: true },
    rowFormatter,
    keybindings: TABULATOR_KEYBINDINGS,
    selectableRange: 1,
    selectableRangeClearCells: editable,
    selectableRangeClearCellsValue: "",
    // Focus stays where the user is (a name field, a button) when the grid redraws.
    selectableRangeAutoFocus: false,
    editTriggerEvent: "dblclick",
    clipboard: editable ? true : "copy",
    clipboardCopyStyled: false,
    clipboardCopyRowRange: "range",
    clipboardCopyConfig: {
      columnHeaders: false,
      columnGroups: false,
      rowHeaders: false,
      rowGroups: false,
      columnCalcs: false,
      dataTree: false,
      formatCells: false,
    },
    // Our own parser and action: the range paste of Tabulator splits quoted cells and
    // cannot add rows, and pasted rows must land in the model, not only in the grid.
    clipboardPasteParser: (text) => {
      const block = parseTSV(text);
      return block.length ? { block } : false;
    },
    clipboardPasteAction: (parsed) => {
      hooks.pasteBlock(parsed.block);
      return [];
    },
  });
  table.on("cellEdited", onCellEdited);
  table.on("rangeChanged", () => hooks.schedulePreview());
  table.on("tableBuilt", () => {
    tableBuilt = true;
    updateEmptyState();
    // Start on the first region of the first row, where typing is most likely.
    const first = state.rows[0];
    if (first && state.regions.length) focusCell({ rowId: first.id, field: fieldOf(state.regions[0].key) }, { takeFocus: false });
  });
  gridEl.addEventListener("keydown", (event) => hooks.onGridKeydown(event), true);
}

// -- items ------------------------------------------------------------------------------

export function newItem() {
  flushEditor();
  const groups = itemGroups();
  const number = String(maxItemNumber() + 1);
  let rows;
  if (groups.length) {
    // Copy the previous item: usually only a word or two differ between items.
    const last = groups[groups.length - 1];
    rows = last.rows.map((row) => ({ id: newRowId(), item: number, cond: row.cond, cells: { ...row.cells } }));
  } else {
    const names = state.conditions.length ? state.conditions : [""];
    rows = names.map((name) => ({ id: newRowId(), item: number, cond: name, cells: {} }));
  }
  state.rows.push(...rows);
  const field = state.regions.length ? fieldOf(state.regions[0].key) : "cond";
  renderGrid({ focus: { rowId: rows[0].id, field }, takeFocus: true });
  changed();
  setStatus(groups.length ? `Added item ${number}, a copy of item ${groups[groups.length - 1].item}.` : `Added item ${number}.`);
}

export function deleteItem() {
  flushEditor();
  const active = activeCell();
  const group = active ? groupOfRow(active.rowId) : null;
  if (!group) {
    setStatus("Select a cell of the item to delete first.");
    return;
  }
  const ids = new Set(group.rows.map((row) => row.id));
  const index = state.rows.findIndex((row) => ids.has(row.id));
  state.rows = state.rows.filter((row) => !ids.has(row.id));
  const next = state.rows[Math.min(index, state.rows.length - 1)];
  renderGrid({ focus: next ? { rowId: next.id, field: active.field } : null, takeFocus: true });
  changed();
  setStatus(`Deleted item ${group.item}. Undo brings it back.`);
}
