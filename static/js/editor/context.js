/* What the page gives the editor: its root element, its settings (config, rendered
 * with json_script) and the suite to start from; the editor's constants; and its shared
 * state: the model of the suite and the calls that go up the modules' order. This module
 * imports no other; the modules import each other in one order, without a circle (see
 * tests/test_rooms.py), and main.js, at the top, fills in `hooks`. */

export const root = document.getElementById("editor");
export const config = root ? JSON.parse(document.getElementById("editor-config").textContent) : {};
export const initialSuite = root ? JSON.parse(document.getElementById("suite-data").textContent) : {};
export const editable = config.mode !== "view";

export const GHOST_ID = -1; // the "new item" row at the bottom of the grid
export const DEBOUNCE_MS = 300;
export const HISTORY_LIMIT = 100;
export const META_TEXT = ["description", "reference", "author", "comment"];
export const META_KNOWN = ["name", "metric", ...META_TEXT, "tags"];

/** The editor's model of the suite (see model.js), one object for every module. */
export let state = null;

/** Swap the whole model (undo, a reload after saving, the page's start). */
export function setState(next) {
  state = next;
}

/** Calls into a module above the caller (the caller cannot import it without a
 * circle), set by main.js before anything runs: undo.js restores a snapshot with
 * `renderAll` and rechecks with `scheduleValidate`, the grid hands keys to keys.js and
 * pastes to paste.js, and so on. */
export const hooks = {
  activeCell: null, // grid.js
  flushEditor: null, // grid.js
  onGridKeydown: null, // keys.js
  scheduleValidate: null, // checks.js
  renderConditions: null, // panels.js
  schedulePreview: null, // panels.js
  pasteBlock: null, // paste.js
  renderAll: null, // main.js
};
