/* The prediction list: each formula checked by the server's parser as it is typed, with
 * the character at the column of the first error marked, and the reference builder. */

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
  fitAll();
  checkAllFormulas();
}

function predictionEntry(formula, i) {
  const id = `prediction-${i}`;
  // A text area that grows with its formula, so that a long one shows in full.
  const input = el("textarea", {
    id,
    rows: 1,
    class: "ed-formula",
    spellcheck: "false",
    autocomplete: "off",
    readOnly: !editable,
    placeholder: "(2;%ungrammatical%) > (2;%grammatical%)",
    "aria-describedby": `${id}-status`,
  });
  input.value = formula;
  const remember = () => {
    lastFormula = { index: i, start: input.selectionStart ?? input.value.length, end: input.selectionEnd ?? input.value.length };
  };
  for (const type of ["focus", "keyup", "click", "select", "input"]) input.addEventListener(type, remember);
  input.addEventListener("input", () => {
    state.predictions[i] = input.value;
    fitHeight(input);
    placeCaret(i);
    changed({ record: false });
    scheduleFormulaCheck(i);
  });
  // A formula is one line: it wraps, and Enter does not break it.
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) event.preventDefault();
  });
  input.addEventListener("change", commit);
  const entry = el(
    "li",
    { class: "ed-pred", "data-index": String(i) },
    el("label", { for: id, class: "ed-pred-label" }, `Prediction ${i + 1}`),
    el(
      "div",
      { class: "ed-pred-row" },
      el("div", { class: "ed-formula-wrap" }, input, el("div", { class: "ed-caret", id: `${id}-caret`, "aria-hidden": "true", hidden: true })),
      editable ? el("button", { type: "button", class: "button small danger", "aria-label": `Delete prediction ${i + 1}`, onclick: () => deletePrediction(i) }, "Delete") : null,
    ),
    el("div", { class: "ed-pred-status", id: `${id}-status`, "aria-live": "polite" }),
  );
  return entry;
}

/** Grow (or shrink) a formula's text area to its content. */
function fitHeight(area) {
  area.style.height = "auto";
  const style = getComputedStyle(area);
  const borders = parseFloat(style.borderTopWidth) + parseFloat(style.borderBottomWidth);
  area.style.height = `${area.scrollHeight + borders}px`;
}

function fitAll() {
  state.predictions.forEach((_, i) => {
    const area = $(`prediction-${i}`);
    if (area) fitHeight(area);
    placeCaret(i);
  });
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
  fitHeight(input);
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

/** Where character `index` of a text area is drawn, relative to its border box: a
 * hidden copy with the same font, width and wrapping measures it. */
function characterBox(area, index) {
  const style = getComputedStyle(area);
  const copy = document.createElement("div");
  for (const name of ["font", "letterSpacing", "lineHeight", "padding", "borderStyle", "borderWidth", "boxSizing", "whiteSpace", "overflowWrap", "wordBreak", "tabSize"]) {
    copy.style[name] = style[name];
  }
  Object.assign(copy.style, { position: "absolute", visibility: "hidden", top: "0", left: "-10000px", width: `${area.offsetWidth}px` });
  const text = area.value;
  const mark = el("span", {}, text[index] && text[index] !== "\n" ? text[index] : " ");
  copy.append(text.slice(0, index), mark);
  document.body.append(copy);
  // Client rectangles keep fractions of a pixel: a column far right stays exact.
  const outer = copy.getBoundingClientRect();
  const inner = mark.getBoundingClientRect();
  copy.remove();
  return { top: inner.top - outer.top, left: inner.left - outer.left, width: inner.width, height: inner.height };
}

/** Mark the character at the column of the error (1-based), on whichever line of the
 * wrapped formula it falls. */
function placeCaret(index) {
  const caret = $(`prediction-${index}-caret`);
  const area = $(`prediction-${index}`);
  if (!caret || !area) return;
  const col = Number(caret.dataset.col || 0);
  caret.hidden = !col;
  if (!col) return;
  const box = characterBox(area, Math.min(col - 1, area.value.length));
  Object.assign(caret.style, {
    top: `${area.offsetTop + box.top - area.scrollTop}px`,
    left: `${area.offsetLeft + box.left}px`,
    width: `${box.width}px`,
    height: `${box.height}px`,
  });
}

window.addEventListener("resize", () => {
  if (state) fitAll();
});
