/* Undo and redo: each change is one snapshot of the model, so undo covers column and
 * condition changes too, which Tabulator's own history cannot see. Also the status line
 * and the "unsaved changes" mark. */

import { HISTORY_LIMIT, editable, hooks, root } from "./context.js";
import { $ } from "./dom.js";
import { setState, state } from "./model.js";


let history = [];
let historyIndex = -1;
let commitQueued = false;
export let savedSnapshot = "";
let dirty = false;

export function snapshot() {
  return JSON.stringify(state);
}

/** The model as it is stored now is the one the "unsaved" marks compare with. */
export function markSaved() {
  savedSnapshot = snapshot();
  commit();
}

/** Record the current model as one undo step (nothing if it did not change). */
export function commit() {
  commitQueued = false;
  const snap = snapshot();
  if (history[historyIndex] !== snap) {
    history = history.slice(0, historyIndex + 1);
    history.push(snap);
    if (history.length > HISTORY_LIMIT) history.shift();
    historyIndex = history.length - 1;
  }
  dirty = snap !== savedSnapshot;
  updateUndoButtons();
  updateDirtyStatus();
}

/** Several grid events from one action (clearing a range fires one per cell) make one
 * undo step: they all arrive before the microtask runs. */
function queueCommit() {
  if (!commitQueued) {
    commitQueued = true;
    queueMicrotask(commit);
  }
}

function restore(snap) {
  const previous = hooks.activeCell();
  setState(JSON.parse(snap));
  hooks.renderAll({ focus: previous, takeFocus: false });
  dirty = snap !== savedSnapshot;
  updateUndoButtons();
  updateDirtyStatus();
  hooks.scheduleValidate();
}

export function undo() {
  hooks.flushEditor();
  commit();
  if (historyIndex <= 0) return;
  historyIndex -= 1;
  restore(history[historyIndex]);
  setStatus("Undone.");
}

export function redo() {
  hooks.flushEditor();
  commit();
  if (historyIndex >= history.length - 1) return;
  historyIndex += 1;
  restore(history[historyIndex]);
  setStatus("Redone.");
}

function updateUndoButtons() {
  if ($("undo")) $("undo").disabled = historyIndex <= 0;
  if ($("redo")) $("redo").disabled = historyIndex >= history.length - 1;
}

/** Something changed: check it again, refresh the preview; `record` makes it an undo
 * step now (text inputs record on "change", when the user leaves the field). */
export function changed({ record = true } = {}) {
  dirty = true;
  updateDirtyStatus();
  if (record) queueCommit();
  hooks.scheduleValidate();
  hooks.schedulePreview();
}

// -- status line --------------------------------------------------------------------------

let statusText = "";

export function setStatus(text, kind = "") {
  statusText = text;
  const status = $("ed-status");
  status.textContent = text;
  status.dataset.kind = kind;
}

function updateDirtyStatus() {
  if (!editable) return;
  root.classList.toggle("is-dirty", dirty);
  if (dirty && (!statusText || statusText.startsWith("Saved"))) setStatus("Unsaved changes");
  if (!dirty && statusText === "Unsaved changes") setStatus("");
}
