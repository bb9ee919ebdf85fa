/* What the page gives the editor: its root element, its settings (config, rendered
 * with json_script) and the suite to start from; plus the editor's constants. */

export const root = document.getElementById("editor");
export const config = root ? JSON.parse(document.getElementById("editor-config").textContent) : {};
export const initialSuite = root ? JSON.parse(document.getElementById("suite-data").textContent) : {};
export const editable = config.mode !== "view";

export const GHOST_ID = -1; // the "new item" row at the bottom of the grid
export const DEBOUNCE_MS = 300;
export const HISTORY_LIMIT = 100;
export const META_TEXT = ["description", "reference", "author", "comment"];
export const META_KNOWN = ["name", "metric", ...META_TEXT, "tags"];
