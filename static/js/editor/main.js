/* Gym grid editor: author and edit a suite in the browser. The entry module: it wires
 * the toolbar and keys and starts the editor; see model.js (the suite), undo.js,
 * grid.js, panels.js, predictions.js, checks.js (the server's checks) and io.js
 * (import, export, saving). Native ES modules, loaded as static files: no build step. */

import { scheduleValidate, validateNow } from "./checks.js";
import { GHOST_ID, config, editable, hooks, initialSuite, root } from "./context.js";
import { $ } from "./dom.js";
import { activeCell, buildTable, columnFields, deleteItem, flushEditor, newItem, renderColumns, table, updateEmptyState } from "./grid.js";
import { exportCSV, exportJSON, importApply, save } from "./io.js";
import { onGridKeydown } from "./keys.js";
import { fromCanonical, keyOf, setState, state, toCanonical } from "./model.js";
import { addCondition, addRegion, bindMeta, renderConditions, renderMeta, renderRegions, schedulePreview } from "./panels.js";
import { pasteBlock, pasteItemsFromDialog } from "./paste.js";
import { addPrediction, insertIntoFormula, renderPredictions } from "./predictions.js";
import { markSaved, redo, savedSnapshot, setStatus, snapshot, undo } from "./undo.js";

// -- wiring -----------------------------------------------------------------------------------

export function renderAll({ focus = undefined, takeFocus = false } = {}) {
  renderMeta();
  renderRegions();
  renderConditions();
  renderPredictions();
  if (table) renderColumns({ focus, takeFocus });
  updateEmptyState();
  schedulePreview();
}

// The calls that go up the modules' order (see `hooks` in context.js).
Object.assign(hooks, {
  activeCell,
  flushEditor,
  onGridKeydown,
  scheduleValidate,
  renderConditions,
  schedulePreview,
  pasteBlock,
  renderAll,
});

function on(id, type, handler) {
  const node = $(id);
  if (node) node.addEventListener(type, handler);
}

// Text fields typed in since they got the focus (see the Ctrl+Z handler).
const typedIn = new WeakSet();

function bindToolbar() {
  on("ed-save", "click", save);
  on("add-region", "click", addRegion);
  on("add-condition", "click", addCondition);
  on("new-item", "click", newItem);
  on("delete-item", "click", deleteItem);
  on("undo", "click", undo);
  on("redo", "click", redo);
  on("export-json", "click", exportJSON);
  on("export-csv", "click", exportCSV);
  on("add-prediction", "click", () => addPrediction(""));
  on("builder-region", "change", (event) => {
    event.target.dataset.chosen = "1";
  });
  on("builder-insert", "click", () => {
    const region = $("builder-region").value;
    const condition = $("builder-condition").value;
    if (!condition) {
      setStatus("Add a condition first: a reference names a region and a condition.");
      return;
    }
    insertIntoFormula(`(${region};%${condition}%)`);
  });
  for (const button of root.querySelectorAll(".ed-op")) {
    button.addEventListener("click", () => insertIntoFormula(button.dataset.op));
  }
  on("open-paste", "click", () => {
    $("paste-error").textContent = "";
    $("paste-dialog").showModal();
    $("paste-text").focus();
  });
  on("paste-apply", "click", pasteItemsFromDialog);
  on("open-import", "click", () => {
    $("import-errors").replaceChildren();
    $("import-dialog").showModal();
  });
  on("import-apply", "click", () => importApply().catch((error) => {
    $("import-errors").textContent = `Not imported: ${error}`;
  }));

  document.addEventListener("keydown", (event) => {
    if (!editable || !(event.ctrlKey || event.metaKey) || event.altKey) return;
    const key = event.key.toLowerCase();
    if (key !== "z" && key !== "y") return;
    const target = event.target;
    // A text field the user has typed in keeps its own undo (the grid's cell editor
    // too); a field that only has the focus undoes the last change to the suite.
    const field = target.closest && target.closest("input, textarea, [contenteditable=true]");
    if (field && (typedIn.has(field) || field.closest("#grid"))) return;
    if (document.querySelector("dialog[open]")) return;
    event.preventDefault();
    if (key === "y" || event.shiftKey) redo();
    else undo();
  });
  root.addEventListener("input", (event) => typedIn.add(event.target));
  root.addEventListener("focusin", (event) => typedIn.delete(event.target));
  window.addEventListener("beforeunload", (event) => {
    if (editable && snapshot() !== savedSnapshot) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
}

/** The active cell as (row, column): row -1 is the "new item" row, column 0 is Item. */
function gridPosition() {
  const cell = activeCell();
  if (!cell) return null;
  const row = cell.rowId === GHOST_ID ? -1 : state.rows.findIndex((r) => r.id === cell.rowId);
  return { row, column: columnFields().indexOf(cell.field) };
}

function cellText(row, column) {
  const data = state.rows[row];
  const field = columnFields()[column];
  if (!data || !field) return null;
  if (field === "item") return data.item;
  if (field === "cond") return data.cond;
  return data.cells[keyOf(field)] ?? "";
}

function start() {
  setState(fromCanonical(initialSuite));
  renderMeta();
  bindMeta();
  renderRegions();
  renderConditions();
  renderPredictions();
  buildTable();
  bindToolbar();
  markSaved();
  updateEmptyState();
  schedulePreview();
  if (config.mode === "new") {
    // A blank suite is not wrong yet: the checks start with the first change.
    $("validation-summary").textContent = "The suite is checked as you type, with the importer's rules.";
  } else {
    validateNow();
  }

  // For tests and the console: the suite as it would be saved.
  window.gymEditor = {
    suite: () => toCanonical().suite,
    activeCell: gridPosition,
    cellText,
    undo,
    redo,
  };
}

// The page may lack the editor's markup or Tabulator (a failed load): then nothing runs.
if (root && typeof Tabulator !== "undefined") start();
