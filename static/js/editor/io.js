/* Import, export and saving. Saving posts the canonical suite to the same API an upload
 * uses, so the grid can never save something the importer would refuse. */

import { showProblems, validateTimer } from "./checks.js";
import { config, hooks, root } from "./context.js";
import { $, download, el, safeFilename, send, urlFor } from "./dom.js";
import { activeCell, flushEditor } from "./grid.js";
import { fromCanonical, itemGroups, setState, state, toCanonical } from "./model.js";
import { schedulePreview } from "./panels.js";
import { changed, commit, markSaved, setStatus } from "./undo.js";


export function exportJSON() {
  flushEditor();
  const { suite } = toCanonical();
  download(`${safeFilename(state.meta.name)}.json`, `${JSON.stringify(suite, null, 2)}\n`, "application/json");
  setStatus("Exported the grid as JSON.");
}

export async function exportCSV() {
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

export async function importApply() {
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
      el("ul", { class: "errors" }, ...errors.slice(0, 20).map((e) => el("li", {}, el("code", { class: "path" }, e.path || "$"), " ", e.message))),
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
  hooks.renderAll({ focus: null });
  changed();
  $("import-dialog").close();
  $("import-file").value = "";
  $("import-text").value = "";
  setStatus(`Imported ${itemGroups().length} items (${data.source_format || "csv"}).`);
}

// -- saving -----------------------------------------------------------------------------------

export async function save() {
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
    const first = result.data && result.data.errors && result.data.errors[0];
    const detail = String((first && first.message) || "you may not change this suite");
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
  setState(fromCanonical(await response.json()));
  hooks.renderAll({ focus: null });
  markSaved();
  if (active) schedulePreview();
}
