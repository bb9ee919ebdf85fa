/* Whole-suite checks: /api/validate/suite/ runs the importer's checks while the user
 * types; each error comes back with its location as numbers, which marks the cell, the
 * field, the region or the prediction it is about. */

import { DEBOUNCE_MS, config, root } from "./context.js";
import { $, el, send } from "./dom.js";
import { cellProblems, focusCell, redecorateRow } from "./grid.js";
import { fieldOf, state, toCanonical } from "./model.js";


export let validateTimer = null;
let validateSeq = 0;
let validateAbort = null;
let lastErrors = [];
// Problems from the whole-suite check, by prediction index.
const predictionProblems = new Map();

export function scheduleValidate() {
  clearTimeout(validateTimer);
  validateTimer = setTimeout(validateNow, DEBOUNCE_MS);
  $("validation-summary").textContent = "Checking…";
}

export async function validateNow() {
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

export function showProblems(errors, warnings, rowMap, predMap, { saving = false } = {}) {
  lastErrors = errors;
  const touched = new Set(Array.from(cellProblems.keys()).map((key) => Number(key.split("|")[0])));
  cellProblems.clear();
  predictionProblems.clear();
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

  for (const rowId of touched) redecorateRow(rowId);
}
