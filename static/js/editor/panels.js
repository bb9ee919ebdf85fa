/* The side panels: the meta form, the lists of regions and conditions, and the preview
 * of the sentences of the item under the cursor. */

import { GHOST_ID, config, editable, root } from "./context.js";
import { $, el } from "./dom.js";
import { activeCell, flushEditor, regionTitle, renderColumns, renderGrid, table } from "./grid.js";
import { fieldOf, groupOfRow, itemGroups, newKey, newRowId, regionParts, renameConditionInFormulas, renumberFormulas, state } from "./model.js";
import { renderBuilderOptions, renderPredictions } from "./predictions.js";
import { changed, commit, setStatus } from "./undo.js";


const metaInputs = root ? Array.from(root.querySelectorAll("[data-meta]")) : [];

export function renderMeta() {
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

export function bindMeta() {
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

export function renderRegions() {
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

export function addRegion() {
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

export function renderConditions() {
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

export function addCondition() {
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

// -- preview --------------------------------------------------------------------------------

let previewQueued = false;

export function schedulePreview() {
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
