/* The prediction list: each formula checked by the server's parser as it is typed, with
 * a caret under the column of the first error, and the reference builder. */

import { DEBOUNCE_MS, config, editable } from "./context.js";
import { $, el, send } from "./dom.js";
import { flushEditor } from "./grid.js";
import { state } from "./model.js";
import { changed, commit } from "./undo.js";


let lastFormula = { index: -1, start: 0, end: 0 };
const formulaTimers = new Map();
const formulaSeq = new Map();

export function renderPredictions() {
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

export function addPrediction(text = "") {
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
export function insertIntoFormula(text) {
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

export function renderBuilderOptions() {
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
