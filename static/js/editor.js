/* Gym grid editor: author and edit a suite in the browser.
 *
 * The page state is a small model of the suite (meta, regions, conditions, one row per
 * item and condition, predictions). The grid (Tabulator) only displays it: every edit,
 * paste or structural change updates the model first, and each change is one undo step
 * (a snapshot of the model), so undo covers column and condition changes too, which
 * Tabulator's own history cannot see.
 *
 * Checks and saving go through the server: /api/validate/suite/ runs the importer's
 * checks while the user types, and saving posts the canonical suite to the same API an
 * upload uses, so the grid can never save something the importer would refuse.
 */
"use strict";

(() => {
  const root = document.getElementById("editor");
  if (!root || typeof Tabulator === "undefined") {
    return;
  }
  const config = JSON.parse(document.getElementById("editor-config").textContent);
  const initialSuite = JSON.parse(document.getElementById("suite-data").textContent);
  const editable = config.mode !== "view";

  const GHOST_ID = -1; // the "new item" row at the bottom of the grid
  const DEBOUNCE_MS = 300;
  const HISTORY_LIMIT = 100;
  const META_TEXT = ["description", "reference", "author", "comment"];
  const META_KNOWN = ["name", "metric", ...META_TEXT, "tags"];

  // -- small helpers ----------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === false || value === null || value === undefined) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key in node && typeof value !== "string") node[key] = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function csrfToken() {
    const input = root.querySelector("input[name=csrfmiddlewaretoken]");
    if (input && input.value) return input.value;
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function urlFor(template, name) {
    return template.replace("__name__", encodeURIComponent(name));
  }

  async function send(url, body, { method = "POST", signal } = {}) {
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-CSRFToken": csrfToken(),
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
      signal,
    });
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    return { status: response.status, ok: response.ok, data };
  }

  function download(filename, text, type) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const link = el("a", { href: url, download: filename, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  function safeFilename(name) {
    return (name || "suite").replace(/[^\w.-]+/g, "_");
  }

  function parseTags(text) {
    return String(text || "")
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean);
  }

  /** Tab-separated rows as spreadsheets copy them: quoted cells may hold tabs, newlines
   * and doubled quotes; the trailing newline they add is not an extra row. */
  function parseTSV(text) {
    const rows = [];
    let row = [];
    let cell = "";
    let i = 0;
    let quotedCell = false;
    text = String(text).replace(/\r\n?/g, "\n");
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"' && cell === "" && !quotedCell) {
        // A quoted cell: read to the closing quote.
        let j = i + 1;
        let value = "";
        let closed = false;
        while (j < text.length) {
          if (text[j] === '"') {
            if (text[j + 1] === '"') {
              value += '"';
              j += 2;
              continue;
            }
            closed = true;
            break;
          }
          value += text[j];
          j += 1;
        }
        if (closed && (j + 1 >= text.length || text[j + 1] === "\t" || text[j + 1] === "\n")) {
          cell = value;
          quotedCell = true;
          i = j + 1;
          continue;
        }
        // Not a well-formed quoted cell: take the quote literally.
      }
      if (ch === "\t") {
        row.push(cell);
        cell = "";
        quotedCell = false;
      } else if (ch === "\n") {
        row.push(cell);
        rows.push(row);
        row = [];
        cell = "";
        quotedCell = false;
      } else {
        cell += ch;
      }
      i += 1;
    }
    if (cell !== "" || row.length || quotedCell) {
      row.push(cell);
      rows.push(row);
    }
    return rows;
  }

  /** The sentence the scoring engine builds from a row: every region stripped, empty
   * regions dropped, the rest joined with single spaces. */
  function regionParts(row) {
    return state.regions
      .map((region, k) => ({ k, text: String(row.cells[region.key] ?? "").trim() }))
      .filter((part) => part.text !== "");
  }

  // -- the model ------------------------------------------------------------------------

  let state = null;
  let keySeq = 0;
  let rowSeq = 0;
  const newKey = () => `r${++keySeq}`;
  const newRowId = () => ++rowSeq;
  const fieldOf = (key) => `f_${key}`;
  const keyOf = (field) => field.slice(2);

  function fromCanonical(suite) {
    const given = suite.meta || {};
    const meta = {
      name: String(given.name ?? ""),
      metric: given.metric ?? "sum",
      tagsText: Array.isArray(given.tags) ? given.tags.join(", ") : "",
    };
    for (const key of META_TEXT) meta[key] = String(given[key] ?? "");
    const extraMeta = {};
    for (const [key, value] of Object.entries(given)) {
      if (!META_KNOWN.includes(key)) extraMeta[key] = value;
    }
    const regionMeta = suite.region_meta || {};
    const numbers = Object.keys(regionMeta)
      .map(Number)
      .sort((a, b) => a - b);
    const regions = numbers.map((n) => ({ key: newKey(), name: String(regionMeta[String(n)] ?? "") }));
    const keyByNumber = new Map(numbers.map((n, i) => [n, regions[i].key]));
    const conditions = [];
    const rows = [];
    for (const item of suite.items || []) {
      for (const condition of item.conditions || []) {
        const name = String(condition.condition_name ?? "");
        if (!conditions.includes(name)) conditions.push(name);
        const cells = {};
        for (const region of condition.regions || []) {
          const key = keyByNumber.get(region.region_number);
          if (key) cells[key] = String(region.content ?? "");
        }
        rows.push({ id: newRowId(), item: String(item.item_number), cond: name, cells });
      }
    }
    const predictions = (suite.predictions || []).map((p) =>
      typeof p === "string" ? p : String(p.formula ?? ""),
    );
    return { meta, extraMeta, regions, conditions, rows, predictions };
  }

  function itemNumberValue(text) {
    const trimmed = String(text ?? "").trim();
    // Anything else is sent as typed, so that the importer says what is wrong with it.
    return /^[+-]?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
  }

  /** Items are runs of consecutive rows with the same item number, as drawn in the grid.
   * A condition met again starts a new item too, so that two neighbouring items given the
   * same number stay two items, and the checks report the number used twice. */
  function itemGroups(rows = state.rows) {
    const groups = [];
    let current = null;
    for (const row of rows) {
      if (!current || row.item !== current.item || current.conds.has(row.cond)) {
        current = { item: row.item, rows: [], conds: new Set() };
        groups.push(current);
      }
      current.rows.push(row);
      current.conds.add(row.cond);
    }
    return groups;
  }

  function groupOfRow(rowId) {
    return itemGroups().find((group) => group.rows.some((row) => row.id === rowId)) || null;
  }

  function maxItemNumber() {
    let max = 0;
    for (const row of state.rows) {
      const value = itemNumberValue(row.item);
      if (typeof value === "number" && value > max) max = value;
    }
    return max;
  }

  /** The suite as the server reads it, plus where each item/condition came from in the
   * grid, to point the server's errors back at cells. */
  function toCanonical() {
    const meta = { name: state.meta.name, metric: state.meta.metric };
    for (const key of META_TEXT) {
      if (state.meta[key]) meta[key] = state.meta[key];
    }
    const tags = parseTags(state.meta.tagsText);
    if (tags.length) meta.tags = tags;
    Object.assign(meta, state.extraMeta);
    const regionMeta = {};
    state.regions.forEach((region, i) => {
      regionMeta[String(i + 1)] = region.name;
    });
    const predictions = [];
    const predMap = [];
    state.predictions.forEach((formula, i) => {
      // A blank line in the list is an unfinished edit, not a prediction.
      if (formula.trim()) {
        predictions.push({ type: "formula", formula });
        predMap.push(i);
      }
    });
    const rowMap = [];
    const items = itemGroups().map((group) => {
      rowMap.push(group.rows.map((row) => row.id));
      return {
        item_number: itemNumberValue(group.item),
        conditions: group.rows.map((row) => ({
          condition_name: row.cond,
          regions: state.regions.map((region, k) => ({
            region_number: k + 1,
            content: row.cells[region.key] ?? "",
          })),
        })),
      };
    });
    return { suite: { meta, region_meta: regionMeta, predictions, items }, rowMap, predMap };
  }

  function ensureConditions(names) {
    let added = false;
    for (const name of names) {
      // A row without a condition is an error for the checks, not a new condition.
      if (name !== "" && !state.conditions.includes(name)) {
        state.conditions.push(name);
        added = true;
      }
    }
    return added;
  }

  /** Rewrite region numbers inside references, e.g. after a region moved. `map` gives
   * the new number, or null for a deleted region (written "?", which the checks flag). */
  function renumberFormulas(map) {
    let touched = 0;
    state.predictions = state.predictions.map((formula) => {
      const next = formula.replace(/\(\s*(\d+)(\s*;)/g, (whole, number, rest) => {
        if (!map.has(Number(number))) return whole;
        const target = map.get(Number(number));
        touched += 1;
        return `(${target === null ? "?" : target}${rest}`;
      });
      return next;
    });
    return touched;
  }

  function renameConditionInFormulas(oldName, newName) {
    state.predictions = state.predictions.map((formula) =>
      formula.replace(/(;\s*%)([^%]*)(%)/g, (whole, open, name, close) =>
        name === oldName ? `${open}${newName}${close}` : whole,
      ),
    );
  }

  // -- undo / redo ------------------------------------------------------------------------

  let history = [];
  let historyIndex = -1;
  let commitQueued = false;
  let savedSnapshot = "";
  let dirty = false;

  function snapshot() {
    return JSON.stringify(state);
  }

  /** Record the current model as one undo step (nothing if it did not change). */
  function commit() {
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
    const previous = activeCell();
    state = JSON.parse(snap);
    renderAll({ focus: previous, takeFocus: false });
    dirty = snap !== savedSnapshot;
    updateUndoButtons();
    updateDirtyStatus();
    scheduleValidate();
  }

  function undo() {
    flushEditor();
    commit();
    if (historyIndex <= 0) return;
    historyIndex -= 1;
    restore(history[historyIndex]);
    setStatus("Undone.");
  }

  function redo() {
    flushEditor();
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
  function changed({ record = true } = {}) {
    dirty = true;
    updateDirtyStatus();
    if (record) queueCommit();
    scheduleValidate();
    schedulePreview();
  }

  // -- status line --------------------------------------------------------------------------

  let statusText = "";

  function setStatus(text, kind = "") {
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

  // -- the grid -----------------------------------------------------------------------------

  const gridEl = $("grid");
  let table = null;
  let tableBuilt = false;
  let renderChain = Promise.resolve();
  // Problems the server found, by cell: "rowId|field" -> messages.
  let cellProblems = new Map();

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

  function columnFields() {
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

  function regionTitle(index) {
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

  function activeCellComponent() {
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

  function activeCell() {
    const cell = activeCellComponent();
    if (!cell) return null;
    return { rowId: cell.getRow().getData().id, field: cell.getField() };
  }

  function rangeCells() {
    if (!table) return [];
    const ranges = table.getRanges();
    if (!ranges.length) return [];
    const cells = ranges[0].getCells();
    return Array.isArray(cells[0]) ? cells.flat() : cells;
  }

  function holder() {
    return gridEl.querySelector(".tabulator-tableholder");
  }

  function focusCell(target, { takeFocus = true } = {}) {
    if (!table || !target) return;
    // The row may be gone (undo, delete); then the grid keeps its default cell.
    if (target.rowId === GHOST_ID ? !editable : !rowById(target.rowId)) return;
    const row = table.getRow(target.rowId);
    if (!row) return;
    const cell = row.getCell(target.field) || row.getCells()[0];
    if (!cell) return;
    const ranges = table.getRanges();
    if (ranges.length) ranges[0].setBounds(cell);
    else table.addRange(cell);
    table.scrollToRow(row, "nearest", false).catch(() => {});
    if (takeFocus) {
      holder()?.focus({ preventScroll: true });
      cell.getElement().scrollIntoView({ block: "nearest", inline: "nearest" });
    }
    schedulePreview();
  }

  /** Redraw the rows from the model, keeping (or moving) the active cell. */
  function renderGrid({ focus = undefined, takeFocus = false } = {}) {
    const keep = focus === undefined ? activeCell() : focus;
    renderChain = renderChain
      .then(() => table.replaceData(gridRows()))
      .then(() => {
        if (keep) focusCell(keep, { takeFocus });
        updateEmptyState();
      })
      .catch((error) => console.error(error));
    return renderChain;
  }

  function renderColumns(options = {}) {
    const keep = options.focus === undefined ? activeCell() : options.focus;
    renderChain = renderChain.then(() => table.setColumns(gridColumns()));
    return renderGrid({ ...options, focus: keep });
  }

  function updateEmptyState() {
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

  function rowById(id) {
    return state.rows.find((row) => row.id === id) || null;
  }

  function setRowField(row, field, value) {
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
      if (ensureConditions([row.cond])) renderConditions();
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
    renderConditions();
    renderGrid({ focus: { rowId: rows[0].id, field }, takeFocus: true });
    changed();
  }

  /** Paste a block at the active cell, as a spreadsheet does. Rows past the last one
   * (or pasted on the "new item" row) become new items: numbered after the last item and
   * given the conditions in order, unless the block has item or condition columns. */
  function pasteBlock(block) {
    const start = activeCell();
    if (!start || !block.length) return;
    const fields = columnFields();
    const col0 = Math.max(fields.indexOf(start.field), 0);
    let row0 = start.rowId === GHOST_ID ? state.rows.length : state.rows.findIndex((r) => r.id === start.rowId);
    if (row0 < 0) row0 = state.rows.length;

    // One value pasted on a larger selection fills the selection.
    const selected = rangeCells();
    if (block.length === 1 && block[0].length === 1 && selected.length > 1) {
      for (const cell of selected) {
        const data = cell.getRow().getData();
        const row = rowById(data.id);
        if (row) setRowField(row, cell.getField(), block[0][0]);
      }
      finishPaste(start, `Filled ${selected.length} cells.`);
      return;
    }

    const width = Math.max(...block.map((values) => values.length));
    const dropped = Math.max(0, col0 + width - fields.length);
    const conditionCount = Math.max(state.conditions.length, 1);
    const coversItem = col0 === 0;
    const coversCond = col0 <= 1 && col0 + width > 1;
    const nextNumber = maxItemNumber() + 1;
    let appended = 0;
    block.forEach((values, r) => {
      const index = row0 + r;
      let row = state.rows[index];
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
    ensureConditions(state.rows.map((row) => row.cond));
    renderConditions();
    const newItems = appended ? itemGroups(state.rows.slice(state.rows.length - appended)).length : 0;
    let message = `Pasted ${block.length} row${block.length === 1 ? "" : "s"}`;
    if (newItems) message += `, adding ${newItems} item${newItems === 1 ? "" : "s"}`;
    message += ".";
    if (dropped) message += ` ${dropped} column${dropped === 1 ? "" : "s"} past the last region ignored.`;
    // On the "new item" row, the first pasted row now holds its place.
    finishPaste({ rowId: state.rows[row0].id, field: start.field }, message);
  }

  function finishPaste(focus, message) {
    renderGrid({ focus, takeFocus: true });
    changed();
    setStatus(message);
  }

  /** Move the active cell after Enter/Tab in an editor, once the grid is redrawn. */
  function moveActive(direction) {
    renderChain = renderChain.then(() => {
      const cell = activeCellComponent();
      if (!cell) return;
      const rows = table.getRows("active");
      const fields = table.getColumns().filter((c) => c.isVisible()).map((c) => c.getField());
      const rowIds = rows.map((r) => r.getData().id);
      let r = rowIds.indexOf(cell.getRow().getData().id);
      let c = fields.indexOf(cell.getField());
      if (direction === "down") r = Math.min(r + 1, rows.length - 1);
      if (direction === "up") r = Math.max(r - 1, 0);
      if (direction === "right") {
        if (c < fields.length - 1) c += 1;
        else if (r < rows.length - 1) {
          // Past the last column, go on at the next row's first region (or condition).
          r += 1;
          c = Math.min(2, fields.length - 1);
        }
      }
      if (direction === "left") {
        if (c > 0) c -= 1;
        else if (r > 0) {
          r -= 1;
          c = fields.length - 1;
        }
      }
      focusCell({ rowId: rowIds[r], field: fields[c] });
    });
  }

  function flushEditor() {
    const input = gridEl.querySelector(".tabulator-cell input, .tabulator-cell textarea");
    if (input) input.blur();
  }

  function startEditing(cell, text) {
    cell.edit(true);
    const input = cell.getElement().querySelector("input");
    if (input) {
      input.value = text;
      input.setSelectionRange(text.length, text.length);
    }
  }

  function onGridKeydown(event) {
    const target = event.target;
    const inEditor = target.tagName === "INPUT" || target.tagName === "TEXTAREA";
    if (inEditor) {
      if (event.key === "Tab" || (event.key === "Enter" && !event.altKey && !event.isComposing)) {
        // Spreadsheet keys: save the cell and move on (the editor saves on blur).
        event.preventDefault();
        event.stopPropagation();
        const direction = event.key === "Tab" ? (event.shiftKey ? "left" : "right") : event.shiftKey ? "up" : "down";
        target.blur();
        moveActive(direction);
      }
      return;
    }
    if (!editable || event.ctrlKey || event.metaKey || event.altKey) return;
    const cell = activeCellComponent();
    if (!cell) return;
    if (event.key.length === 1 && !event.isComposing) {
      // Typing on a selected cell replaces its content, as in a spreadsheet.
      event.preventDefault();
      event.stopPropagation();
      startEditing(cell, event.key);
    } else if (event.key === "F2") {
      event.preventDefault();
      cell.edit(true);
    }
  }

  function buildTable() {
    table = new Tabulator(gridEl, {
      data: gridRows(),
      columns: gridColumns(),
      index: "id",
      layout: "fitColumns",
      maxHeight: "62vh",
      placeholder: "No items yet",
      columnDefaults: { headerSort: false, resizable: true },
      rowFormatter,
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
        pasteBlock(parsed.block);
        return [];
      },
    });
    table.on("cellEdited", onCellEdited);
    table.on("rangeChanged", schedulePreview);
    table.on("tableBuilt", () => {
      tableBuilt = true;
      updateEmptyState();
      // Start on the first region of the first row, where typing is most likely.
      const first = state.rows[0];
      if (first && state.regions.length) focusCell({ rowId: first.id, field: fieldOf(state.regions[0].key) }, { takeFocus: false });
    });
    gridEl.addEventListener("keydown", onGridKeydown, true);
  }

  // -- meta form ----------------------------------------------------------------------------

  const metaInputs = Array.from(root.querySelectorAll("[data-meta]"));

  function renderMeta() {
    const metric = $("meta-metric");
    metric.replaceChildren();
    for (const name of config.metrics) metric.append(el("option", { value: name }, name));
    if (typeof state.meta.metric !== "string" || !config.metrics.includes(state.meta.metric)) {
      // A list of metrics (or an unknown one) is kept as it is.
      metric.append(el("option", { value: "__kept__" }, `as loaded: ${JSON.stringify(state.meta.metric)}`));
      metric.value = "__kept__";
    } else {
      metric.value = state.meta.metric;
    }
    for (const input of metaInputs) {
      const key = input.dataset.meta;
      if (key === "metric") continue;
      input.value = key === "tags" ? state.meta.tagsText : state.meta[key] ?? "";
      input.disabled = !editable;
    }
    metric.disabled = !editable;
  }

  function bindMeta() {
    for (const input of metaInputs) {
      const key = input.dataset.meta;
      input.addEventListener("input", () => {
        if (key === "metric") {
          if (input.value !== "__kept__") state.meta.metric = input.value;
        } else if (key === "tags") {
          state.meta.tagsText = input.value;
        } else {
          state.meta[key] = input.value;
        }
        changed({ record: false });
      });
      input.addEventListener("change", commit);
    }
  }

  // -- regions and conditions -------------------------------------------------------------

  function renderRegions() {
    const list = $("region-list");
    list.replaceChildren();
    state.regions.forEach((region, i) => {
      const id = `region-name-${i}`;
      const input = el("input", {
        id,
        type: "text",
        value: region.name,
        class: "ed-inline",
        autocomplete: "off",
        placeholder: "name, e.g. Verb",
        disabled: !editable,
        "aria-describedby": `region-error-${i}`,
      });
      input.addEventListener("input", () => {
        region.name = input.value;
        updateColumnTitle(i);
        renderBuilderOptions();
        changed({ record: false });
      });
      input.addEventListener("change", commit);
      const item = el(
        "li",
        { class: "ed-entry", "data-region": String(i) },
        el("label", { for: id, class: "ed-num" }, el("span", { class: "visually-hidden" }, "Name of region "), String(i + 1)),
        input,
      );
      if (editable) {
        item.append(
          el("button", { type: "button", class: "button small", "aria-label": `Move region ${i + 1} left`, title: "Move left", disabled: i === 0, onclick: () => moveRegion(i, -1) }, "←"),
          el("button", { type: "button", class: "button small", "aria-label": `Move region ${i + 1} right`, title: "Move right", disabled: i === state.regions.length - 1, onclick: () => moveRegion(i, 1) }, "→"),
          el("button", { type: "button", class: "button small danger", "aria-label": `Delete region ${i + 1}`, onclick: () => deleteRegion(i) }, "Delete"),
        );
      }
      item.append(el("div", { class: "ed-field-error", id: `region-error-${i}` }));
      list.append(item);
    });
    if (!state.regions.length) list.append(el("li", { class: "muted ed-none" }, "No regions yet."));
    renderBuilderOptions();
  }

  function updateColumnTitle(index) {
    const region = state.regions[index];
    const column = table && table.getColumn(fieldOf(region.key));
    if (!column) return;
    const title = column.getElement().querySelector(".tabulator-col-title");
    if (title) title.replaceChildren(regionTitle(index)());
  }

  function addRegion() {
    flushEditor();
    state.regions.push({ key: newKey(), name: "" });
    renderRegions();
    renderColumns();
    changed();
    const input = $(`region-name-${state.regions.length - 1}`);
    if (input) input.focus();
  }

  function moveRegion(index, step) {
    const other = index + step;
    if (other < 0 || other >= state.regions.length) return;
    flushEditor();
    [state.regions[index], state.regions[other]] = [state.regions[other], state.regions[index]];
    renumberFormulas(new Map([[index + 1, other + 1], [other + 1, index + 1]]));
    renderRegions();
    renderColumns();
    renderPredictions();
    changed();
    // Keep the focus on the same button, so that the region can be moved again.
    const side = step < 0 ? "left" : "right";
    const again = root.querySelector(`[aria-label="Move region ${other + 1} ${side}"]`);
    if (again && !again.disabled) again.focus();
    else root.querySelector(`[aria-label^="Move region ${other + 1} "]:not([disabled])`)?.focus();
    setStatus(`Moved region “${state.regions[other].name}” to position ${other + 1}; predictions follow it.`);
  }

  function deleteRegion(index) {
    flushEditor();
    const [removed] = state.regions.splice(index, 1);
    for (const row of state.rows) delete row.cells[removed.key];
    const map = new Map([[index + 1, null]]);
    for (let n = index + 2; n <= state.regions.length + 1; n += 1) map.set(n, n - 1);
    const before = JSON.stringify(state.predictions);
    renumberFormulas(map);
    const broken = state.predictions.filter((f) => /\(\s*\?\s*;/.test(f)).length;
    renderRegions();
    renderColumns();
    renderPredictions();
    changed();
    let message = `Deleted region ${index + 1}${removed.name ? ` (${removed.name})` : ""}. Undo brings it back.`;
    if (broken && JSON.stringify(state.predictions) !== before) message += ` ${broken} prediction${broken === 1 ? "" : "s"} referred to it (now “?”).`;
    setStatus(message);
  }

  function renderConditions() {
    const list = $("condition-list");
    list.replaceChildren();
    state.conditions.forEach((name, i) => {
      const id = `condition-name-${i}`;
      const input = el("input", {
        id,
        type: "text",
        value: name,
        class: "ed-inline mono",
        autocomplete: "off",
        spellcheck: "false",
        disabled: !editable,
        "aria-describedby": `condition-error-${i}`,
      });
      // Renamed when the user leaves the field: renaming on each keystroke could pass
      // through the name of another condition and merge the two.
      input.addEventListener("change", () => renameCondition(i, input));
      const item = el(
        "li",
        { class: "ed-entry" },
        el("label", { for: id, class: "visually-hidden" }, `Name of condition ${i + 1}`),
        input,
      );
      if (editable) {
        item.append(el("button", { type: "button", class: "button small danger", "aria-label": `Delete condition ${name}`, onclick: () => deleteCondition(i) }, "Delete"));
      }
      item.append(el("div", { class: "ed-field-error", id: `condition-error-${i}`, "aria-live": "polite" }));
      list.append(item);
    });
    if (!state.conditions.length) list.append(el("li", { class: "muted ed-none" }, "No conditions yet."));
    renderBuilderOptions();
  }

  function renameCondition(index, input) {
    const oldName = state.conditions[index];
    const newName = input.value.trim();
    const error = $(`condition-error-${index}`);
    if (newName === oldName) return;
    if (state.conditions.includes(newName)) {
      error.textContent = `There is already a condition named “${newName}”.`;
      input.value = oldName;
      return;
    }
    error.textContent = "";
    state.conditions[index] = newName;
    for (const row of state.rows) if (row.cond === oldName) row.cond = newName;
    renameConditionInFormulas(oldName, newName);
    renderBuilderOptions();
    renderPredictions();
    renderGrid();
    changed();
  }

  function addCondition() {
    flushEditor();
    let n = state.conditions.length + 1;
    while (state.conditions.includes(`cond${n}`)) n += 1;
    const name = `cond${n}`;
    state.conditions.push(name);
    // Every item gets the new condition, after its last row.
    const rows = [];
    for (const group of itemGroups()) {
      rows.push(...group.rows, { id: newRowId(), item: group.item, cond: name, cells: {} });
    }
    state.rows = rows;
    renderConditions();
    renderGrid();
    changed();
    const input = $(`condition-name-${state.conditions.length - 1}`);
    if (input) {
      input.focus();
      input.select();
    }
  }

  function deleteCondition(index) {
    flushEditor();
    const [name] = state.conditions.splice(index, 1);
    const before = state.rows.length;
    state.rows = state.rows.filter((row) => row.cond !== name);
    renderConditions();
    renderGrid({ focus: null });
    renderPredictions();
    changed();
    setStatus(`Deleted condition “${name}” (${before - state.rows.length} rows). Undo brings it back.`);
  }

  // -- items ------------------------------------------------------------------------------

  function newItem() {
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

  function deleteItem() {
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

  function pasteItemsFromDialog() {
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
    if (/^(item|item_number|#)$/i.test(block[0][0].trim()) || /^(condition|condition_name)$/i.test(block[0][0].trim())) {
      block.shift();
    }
    const width = Math.max(...block.map((values) => values.length));
    let startField;
    if (width >= regionCount + 2) startField = "item";
    else if (width === regionCount + 1) startField = "cond";
    else if (width === regionCount) startField = fieldOf(state.regions[0].key);
    else {
      error.textContent = `Each row needs ${regionCount} region columns (optionally after item and condition columns); the widest row has ${width}.`;
      return;
    }
    error.textContent = "";
    const ghost = { rowId: GHOST_ID, field: startField };
    renderChain = renderChain.then(() => {
      focusCell(ghost, { takeFocus: false });
      pasteBlock(block);
    });
    $("paste-dialog").close();
    $("paste-text").value = "";
  }

  // -- predictions ------------------------------------------------------------------------

  let lastFormula = { index: -1, start: 0, end: 0 };
  const formulaTimers = new Map();
  const formulaSeq = new Map();
  // Problems from the whole-suite check, by prediction index.
  let predictionProblems = new Map();

  function renderPredictions() {
    const list = $("prediction-list");
    list.replaceChildren();
    state.predictions.forEach((formula, i) => list.append(predictionEntry(formula, i)));
    if (!state.predictions.length) {
      list.append(el("li", { class: "muted ed-none" }, editable ? "No predictions yet: add one below." : "No predictions."));
    }
    checkAllFormulas();
  }

  function predictionEntry(formula, i) {
    const id = `prediction-${i}`;
    const input = el("input", {
      id,
      type: "text",
      class: "ed-formula",
      value: formula,
      spellcheck: "false",
      autocomplete: "off",
      readOnly: !editable,
      placeholder: "(2;%ungrammatical%) > (2;%grammatical%)",
      "aria-describedby": `${id}-status`,
    });
    const remember = () => {
      lastFormula = { index: i, start: input.selectionStart ?? input.value.length, end: input.selectionEnd ?? input.value.length };
    };
    for (const type of ["focus", "keyup", "click", "select", "input"]) input.addEventListener(type, remember);
    input.addEventListener("input", () => {
      state.predictions[i] = input.value;
      changed({ record: false });
      scheduleFormulaCheck(i);
    });
    input.addEventListener("change", commit);
    input.addEventListener("scroll", () => placeCaret(i));
    const entry = el(
      "li",
      { class: "ed-pred", "data-index": String(i) },
      el("label", { for: id, class: "ed-pred-label" }, `Prediction ${i + 1}`),
      el(
        "div",
        { class: "ed-pred-row" },
        el("div", { class: "ed-formula-wrap" }, input, el("div", { class: "ed-caret", id: `${id}-caret`, "aria-hidden": "true" })),
        editable ? el("button", { type: "button", class: "button small danger", "aria-label": `Delete prediction ${i + 1}`, onclick: () => deletePrediction(i) }, "Delete") : null,
      ),
      el("div", { class: "ed-pred-status", id: `${id}-status`, "aria-live": "polite" }),
    );
    return entry;
  }

  function addPrediction(text = "") {
    flushEditor();
    state.predictions.push(text);
    renderPredictions();
    changed();
    const index = state.predictions.length - 1;
    const input = $(`prediction-${index}`);
    if (input) {
      input.focus();
      lastFormula = { index, start: input.value.length, end: input.value.length };
    }
  }

  function deletePrediction(index) {
    state.predictions.splice(index, 1);
    renderPredictions();
    changed();
  }

  /** Insert text at the caret of the prediction last edited (a new one if none). */
  function insertIntoFormula(text) {
    if (!state.predictions.length || lastFormula.index < 0 || lastFormula.index >= state.predictions.length) {
      addPrediction("");
    }
    const index = lastFormula.index;
    const input = $(`prediction-${index}`);
    const value = state.predictions[index];
    const start = Math.min(lastFormula.start, value.length);
    const end = Math.min(Math.max(lastFormula.end, start), value.length);
    const next = value.slice(0, start) + text + value.slice(end);
    state.predictions[index] = next;
    input.value = next;
    const caret = start + text.length;
    input.focus();
    input.setSelectionRange(caret, caret);
    lastFormula = { index, start: caret, end: caret };
    changed();
    scheduleFormulaCheck(index);
  }

  function renderBuilderOptions() {
    const region = $("builder-region");
    const condition = $("builder-condition");
    if (!region || !condition) return;
    const keepRegion = region.value;
    const keepCondition = condition.value;
    region.replaceChildren(
      ...state.regions.map((r, i) => el("option", { value: String(i + 1) }, `${i + 1} ${r.name}`)),
      el("option", { value: "*" }, "* whole sentence"),
    );
    condition.replaceChildren(...state.conditions.map((name) => el("option", { value: name }, name)));
    // Keep the user's choice across redraws; otherwise offer the first region.
    if (region.dataset.chosen && Array.from(region.options).some((o) => o.value === keepRegion)) region.value = keepRegion;
    if (Array.from(condition.options).some((o) => o.value === keepCondition)) condition.value = keepCondition;
    if (!state.conditions.length) condition.append(el("option", { value: "", disabled: true }, "no conditions yet"));
  }

  function scheduleFormulaCheck(index) {
    clearTimeout(formulaTimers.get(index));
    formulaTimers.set(index, setTimeout(() => checkFormula(index), DEBOUNCE_MS));
  }

  function checkAllFormulas() {
    state.predictions.forEach((_, i) => scheduleFormulaCheck(i));
  }

  async function checkFormula(index) {
    const formula = state.predictions[index];
    const status = $(`prediction-${index}-status`);
    const input = $(`prediction-${index}`);
    if (formula === undefined || !status || !input) return;
    if (!formula.trim()) {
      showFormula(index, { ok: false, canonical: null, errors: [{ col: null, message: "empty: write a formula, or delete this prediction" }] });
      return;
    }
    const seq = (formulaSeq.get(index) || 0) + 1;
    formulaSeq.set(index, seq);
    let result;
    try {
      result = await send(config.validateFormulaUrl, {
        formula,
        regions: state.regions.map((_, i) => i + 1),
        conditions: state.conditions,
      });
    } catch (_) {
      return;
    }
    // A later keystroke already asked again, or the list changed meanwhile.
    if (formulaSeq.get(index) !== seq || state.predictions[index] !== formula || !result.data) return;
    showFormula(index, result.data);
  }

  function showFormula(index, result) {
    const status = $(`prediction-${index}-status`);
    const input = $(`prediction-${index}`);
    const caret = $(`prediction-${index}-caret`);
    if (!status || !input) return;
    status.replaceChildren();
    const entry = input.closest(".ed-pred");
    entry.classList.toggle("is-invalid", !result.ok);
    entry.classList.toggle("is-valid", result.ok);
    input.setAttribute("aria-invalid", result.ok ? "false" : "true");
    caret.dataset.col = "";
    if (result.ok) {
      status.append(el("span", { class: "ok" }, "✓ valid"));
      if (result.canonical && result.canonical !== state.predictions[index].trim()) {
        status.append(" · saved as ", el("code", {}, result.canonical));
      }
    } else {
      for (const error of result.errors) {
        const line = el("div", { class: "bad" });
        if (error.col) line.append(el("strong", {}, `col ${error.col}: `));
        line.append(error.message);
        status.append(line);
      }
      const withCol = result.errors.find((e) => e.col);
      if (withCol) {
        caret.dataset.col = String(withCol.col);
        status.append(excerpt(state.predictions[index], withCol.col));
      }
    }
    placeCaret(index);
  }

  /** The formula with the character at `col` (1-based) marked; long ones are cut. */
  function excerpt(text, col) {
    const at = col - 1;
    const start = Math.max(0, at - 40);
    const end = Math.min(text.length, at + 40);
    return el(
      "code",
      { class: "ed-excerpt" },
      start ? "…" : "",
      text.slice(start, at),
      el("mark", {}, text[at] ?? " "),
      text.slice(at + 1, end),
      end < text.length ? "…" : "",
    );
  }

  /** The caret under the column of the error: the input and the caret line share one
   * monospace font and padding, so column n sits n-1 characters from the left. */
  function placeCaret(index) {
    const caret = $(`prediction-${index}-caret`);
    const input = $(`prediction-${index}`);
    if (!caret || !input) return;
    const col = Number(caret.dataset.col || 0);
    if (!col) {
      caret.textContent = "";
      return;
    }
    caret.textContent = "^";
    caret.style.marginLeft = `calc(${col - 1}ch - ${input.scrollLeft}px)`;
  }

  // -- whole-suite checks -------------------------------------------------------------------

  let validateTimer = null;
  let validateSeq = 0;
  let validateAbort = null;
  let lastErrors = [];

  function scheduleValidate() {
    clearTimeout(validateTimer);
    validateTimer = setTimeout(validateNow, DEBOUNCE_MS);
    $("validation-summary").textContent = "Checking…";
  }

  async function validateNow() {
    const { suite, rowMap, predMap } = toCanonical();
    const seq = ++validateSeq;
    if (validateAbort) validateAbort.abort();
    validateAbort = new AbortController();
    let url = config.validateSuiteUrl;
    if (config.name) url += `?replace=${encodeURIComponent(config.name)}`;
    let result;
    try {
      result = await send(url, suite, { signal: validateAbort.signal });
    } catch (error) {
      if (error.name !== "AbortError") $("validation-summary").textContent = "Could not reach the server to check the suite.";
      return;
    }
    if (seq !== validateSeq || !result.data) return;
    showProblems(result.data.errors || [], result.data.warnings || [], rowMap, predMap);
  }

  // The server says where each error is as numbers (error.location): item, condition and
  // region indices, a region_meta number, a prediction index or a meta key.
  function locate(at, rowMap, predMap) {
    if (at.section === "items" && at.item !== undefined) {
      const ids = rowMap[at.item] || [];
      if (at.condition === undefined) return { cells: ids.map((rowId) => [rowId, "item"]) };
      const id = ids[at.condition];
      if (id === undefined) return { cells: ids.map((rowId) => [rowId, "item"]) };
      if (at.region !== undefined) {
        const target = state.regions[at.region];
        return { cells: [[id, target ? fieldOf(target.key) : "cond"]] };
      }
      return { cells: [[id, "cond"]] };
    }
    if (at.section === "region_meta") return { region: at.region_number ? at.region_number - 1 : null };
    if (at.section === "meta" && at.key) return { meta: at.key };
    if (at.section === "predictions" && at.prediction !== undefined) return { prediction: predMap[at.prediction] };
    return {};
  }

  function showProblems(errors, warnings, rowMap, predMap, { saving = false } = {}) {
    lastErrors = errors;
    const touched = new Set(Array.from(cellProblems.keys()).map((key) => Number(key.split("|")[0])));
    cellProblems = new Map();
    predictionProblems = new Map();
    const list = $("validation-errors");
    list.replaceChildren();
    for (const box of root.querySelectorAll(".ed-field-error")) {
      if (!box.closest("dialog") && !box.id.startsWith("condition-error")) box.textContent = "";
    }
    for (const node of root.querySelectorAll(".ed-entry.is-invalid, .ed-field.is-invalid")) node.classList.remove("is-invalid");

    for (const error of errors) {
      const where = locate(error.location || {}, rowMap, predMap);
      const entry = el("li", {}, el("code", { class: "path" }, error.path), " ", error.message);
      if (where.cells && where.cells.length) {
        for (const [rowId, field] of where.cells) {
          const key = `${rowId}|${field}`;
          if (!cellProblems.has(key)) cellProblems.set(key, []);
          cellProblems.get(key).push(error.message);
          touched.add(rowId);
        }
        const [rowId, field] = where.cells[0];
        entry.append(" ", el("button", { type: "button", class: "link", onclick: () => focusCell({ rowId, field }) }, "show in grid"));
      } else if (where.meta) {
        const input = $(`meta-${where.meta}`);
        if (input) {
          input.closest(".ed-field").classList.add("is-invalid");
          const box = $(`meta-${where.meta}-error`);
          if (box) box.textContent = error.message;
          entry.append(" ", el("button", { type: "button", class: "link", onclick: () => input.focus() }, "show"));
        }
      } else if (where.region !== undefined) {
        const index = where.region === null ? 0 : where.region;
        const box = $(`region-error-${index}`);
        if (box) {
          box.textContent = error.message;
          box.closest(".ed-entry").classList.add("is-invalid");
        }
      } else if (where.prediction !== undefined) {
        if (!predictionProblems.has(where.prediction)) predictionProblems.set(where.prediction, []);
        predictionProblems.get(where.prediction).push(error.message);
        const entryEl = $(`prediction-${where.prediction}`)?.closest(".ed-pred");
        if (entryEl) entryEl.classList.add("is-invalid");
      }
      list.append(entry);
    }
    const summary = $("validation-summary");
    summary.className = "ed-summary";
    if (errors.length) {
      summary.classList.add("bad");
      summary.textContent = saving
        ? `Not saved: ${errors.length} problem${errors.length === 1 ? "" : "s"} to fix first. Nothing was changed.`
        : `${errors.length} problem${errors.length === 1 ? "" : "s"} to fix before the suite can be saved.`;
    } else {
      summary.classList.add("ok");
      summary.textContent = "No problems: the suite can be saved.";
    }
    const warnBox = $("validation-warnings-box");
    const warnList = $("validation-warnings");
    warnList.replaceChildren(...warnings.map((w) => el("li", {}, w)));
    warnBox.hidden = !warnings.length;
    $("validation-warnings-summary").textContent = `${warnings.length} note${warnings.length === 1 ? "" : "s"}`;

    if (table) {
      for (const rowId of touched) {
        const row = table.getRow(rowId);
        if (row) row.reformat();
      }
    }
  }

  // -- preview --------------------------------------------------------------------------------

  let previewQueued = false;

  function schedulePreview() {
    if (previewQueued) return;
    previewQueued = true;
    requestAnimationFrame(() => {
      previewQueued = false;
      renderPreview();
    });
  }

  function renderPreview() {
    const box = $("preview");
    box.replaceChildren();
    const active = activeCell();
    let group = active && active.rowId !== GHOST_ID ? groupOfRow(active.rowId) : null;
    if (!group) group = itemGroups()[0] || null;
    if (!group) {
      box.append(el("p", { class: "muted" }, "Sentences appear here once the grid has items."));
      return;
    }
    box.append(el("p", { class: "ed-preview-head" }, `Item ${group.item || "(no number)"}`));
    const list = el("dl", { class: "ed-preview-list" });
    for (const row of group.rows) {
      const parts = regionParts(row);
      const sentence = el("dd", { class: "ed-sentence", "data-row": String(row.id) });
      parts.forEach((part, i) => {
        if (i) sentence.append(" ");
        const region = state.regions[part.k];
        sentence.append(el("span", { class: "pv-region", title: `${part.k + 1} ${region.name}` }, part.text));
      });
      if (!parts.length) sentence.append(el("em", { class: "muted" }, "(empty)"));
      const isActive = active && active.rowId === row.id;
      list.append(el("dt", { class: isActive ? "is-active" : "" }, row.cond || "(no condition)"), sentence);
      if (isActive) sentence.classList.add("is-active");
    }
    box.append(list);
  }

  // -- import / export ----------------------------------------------------------------------

  function exportJSON() {
    flushEditor();
    const { suite } = toCanonical();
    download(`${safeFilename(state.meta.name)}.json`, `${JSON.stringify(suite, null, 2)}\n`, "application/json");
    setStatus("Exported the grid as JSON.");
  }

  async function exportCSV() {
    flushEditor();
    const { suite } = toCanonical();
    const result = await send(`${config.validateSuiteUrl}?to=csv`, suite);
    if (result.data && typeof result.data.csv === "string") {
      download(`${safeFilename(state.meta.name)}.csv`, result.data.csv, "text/csv");
      setStatus("Exported the grid as CSV.");
    } else {
      setStatus("CSV export needs a valid suite: fix the problems under Checks first.", "bad");
    }
  }

  async function importApply() {
    const errorBox = $("import-errors");
    errorBox.replaceChildren();
    const file = $("import-file").files[0];
    let text = $("import-text").value;
    let filename = "";
    if (file) {
      text = await file.text();
      filename = file.name;
    }
    if (!text.trim()) {
      errorBox.textContent = "Choose a file or paste a suite.";
      return;
    }
    const isCsv = /\.csv$/i.test(filename) || (!filename && !/^\s*[{[]/.test(text.replace(/^\ufeff/, "")));
    let result;
    if (isCsv) {
      const meta = { name: state.meta.name.trim() || "imported suite" };
      if (typeof state.meta.metric === "string") meta.metric = state.meta.metric;
      result = await send(`${config.validateSuiteUrl}?as=csv`, { csv: text, meta });
    } else {
      result = await send(config.validateSuiteUrl, text);
    }
    const data = result.data || {};
    if (!data.suite) {
      const errors = data.errors || [{ path: "$", message: `the server answered ${result.status}` }];
      errorBox.append(
        el("p", {}, `Not imported: ${errors.length} problem${errors.length === 1 ? "" : "s"}.`),
        el("ul", { class: "errors" }, ...errors.slice(0, 20).map((e) => el("li", {}, el("code", { class: "path" }, e.path), " ", e.message))),
      );
      return;
    }
    flushEditor();
    const incoming = fromCanonical(data.suite);
    state.regions = incoming.regions;
    state.conditions = incoming.conditions;
    state.rows = incoming.rows;
    if (!isCsv) {
      const keepName = state.meta.name.trim();
      state.meta = incoming.meta;
      state.extraMeta = incoming.extraMeta;
      if (keepName) state.meta.name = keepName;
      state.predictions = incoming.predictions;
    }
    renderAll({ focus: null });
    changed();
    $("import-dialog").close();
    $("import-file").value = "";
    $("import-text").value = "";
    setStatus(`Imported ${itemGroups().length} items (${data.source_format || "csv"}).`);
  }

  // -- saving -----------------------------------------------------------------------------------

  async function save() {
    flushEditor();
    commit();
    clearTimeout(validateTimer);
    const button = $("ed-save");
    const { suite, rowMap, predMap } = toCanonical();
    const isNew = !config.name;
    button.disabled = true;
    setStatus("Saving…");
    let result;
    try {
      result = await send(isNew ? config.createUrl : urlFor(config.suiteApiUrl, config.name), suite, {
        method: isNew ? "POST" : "PUT",
      });
    } catch (_) {
      setStatus("Not saved: the server could not be reached.", "bad");
      button.disabled = false;
      return;
    }
    button.disabled = false;
    if (result.status === 200 || result.status === 201) {
      config.name = result.data.name;
      config.mode = "edit";
      await reloadSaved();
      const link = $("ed-suite-link");
      link.href = urlFor(config.detailUrl, config.name);
      link.hidden = false;
      window.history.replaceState(null, "", urlFor(config.gridUrl, config.name));
      const title = root.querySelector("h1.suite-name");
      title.replaceChildren("Edit “", el("span", { id: "ed-title-name" }, config.name), "” ", el("span", { class: "ed-subtitle" }, "grid editor"));
      document.title = `Edit ${config.name} · Gym`;
      setStatus(`Saved “${config.name}”: ${result.data.item_count} items.`, "ok");
      showProblems([], result.data.warnings || [], [], []);
    } else if (result.status === 400 && result.data && result.data.errors) {
      showProblems(result.data.errors, [], rowMap, predMap, { saving: true });
      setStatus(`Not saved: ${result.data.errors.length} problem${result.data.errors.length === 1 ? "" : "s"} (see Checks).`, "bad");
      $("validation").scrollIntoView({ block: "start" });
    } else if (result.status === 403 || result.status === 401) {
      const detail = String((result.data && result.data.detail) || "you may not change this suite");
      setStatus(`Not saved: ${detail.replace(/\.$/, "")}.`, "bad");
    } else {
      setStatus(`Not saved: the server answered ${result.status}.`, "bad");
    }
  }

  /** After a save, show what was stored (the importer strips stray spaces, slugs tags). */
  async function reloadSaved() {
    const response = await fetch(urlFor(config.exportUrl, config.name), { credentials: "same-origin" });
    if (!response.ok) return;
    const active = activeCell();
    state = fromCanonical(await response.json());
    renderAll({ focus: null });
    savedSnapshot = snapshot();
    commit();
    if (active) schedulePreview();
  }

  // -- wiring -----------------------------------------------------------------------------------

  function renderAll({ focus = undefined, takeFocus = false } = {}) {
    renderMeta();
    renderRegions();
    renderConditions();
    renderPredictions();
    if (table) renderColumns({ focus, takeFocus });
    updateEmptyState();
    schedulePreview();
  }

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

  state = fromCanonical(initialSuite);
  renderMeta();
  bindMeta();
  renderRegions();
  renderConditions();
  renderPredictions();
  buildTable();
  bindToolbar();
  savedSnapshot = snapshot();
  commit();
  dirty = false;
  updateDirtyStatus();
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
    undo,
    redo,
  };
})();
