// The training form: show only the groups of options of the chosen kind of model (and the
// custom shape only with the custom preset), and check the corpus against the chosen
// benchmarks as they are chosen. Without JavaScript every group shows, with its legend.
(function () {
  "use strict";
  const WAIT_MS = 400;
  const KIND_NAMES = { suite: "suite", pairs: "minimal pairs", probing: "probing task" };
  const BENCHMARKS = ["suites", "tags", "pair_sets", "probing_tasks"];

  function value(form, name) {
    const field = form.elements.namedItem(name);
    return field ? field.value : "";
  }

  // Each element names the kinds it is for (data-kind, space-separated) and the preset
  // it needs (data-preset); one that names neither is for every kind.
  function applies(el, kind, preset) {
    if (el.dataset.kind && el.dataset.kind.split(" ").indexOf(kind) < 0) return false;
    return !el.dataset.preset || el.dataset.preset === preset;
  }

  function showGroups(form) {
    const kind = value(form, "kind");
    const preset = value(form, "preset");
    form.querySelectorAll("[data-kind], [data-preset]").forEach(function (el) {
      el.hidden = !applies(el, kind, preset);
    });
  }

  function chosen(form, name) {
    const field = form.elements.namedItem(name);
    if (!field || !field.selectedOptions) return [];
    const holder = field.closest("[data-kind]");
    if (holder && holder.hidden) return [];
    return Array.from(field.selectedOptions).map(function (o) { return o.value; });
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
  }

  function table(rows) {
    const out = document.createElement("table");
    out.className = "table corpus-check";
    const head = out.createTHead().insertRow();
    ["Benchmark", "Kind", "Sentences", "In the corpus", "Share"].forEach(function (name, i) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = name;
      if (i > 1) th.className = "num";
      head.appendChild(th);
    });
    const body = out.createTBody();
    rows.forEach(function (r) {
      const row = body.insertRow();
      if (r.found) row.className = "overlap-found";
      cell(row, r.name);
      cell(row, KIND_NAMES[r.kind] || r.kind);
      cell(row, r.sentences === null ? "—" : String(r.sentences), "num");
      cell(row, r.found === null ? "—" : String(r.found), "num");
      cell(row, r.share === null ? "—" : r.share.toFixed(3), "num");
    });
    return out;
  }

  function show(box, message, warn, rows) {
    const text = box.querySelector("[data-check-text]");
    text.textContent = message;
    text.className = warn ? "notice-box overlap-warning" : "muted small";
    const holder = box.querySelector("[data-check-table]");
    holder.replaceChildren();
    if (rows && rows.length) holder.appendChild(table(rows));
  }

  function summary(body) {
    if (body.error) return "The corpus could not be checked: " + body.error + ".";
    const count = body.benchmarks.length;
    if (!body.found) {
      return "None of the " + count + " benchmarks has a sentence in the corpus " + body.corpus + ".";
    }
    return body.found + " of the " + count + " benchmarks have sentences in the corpus " + body.corpus +
      ": a model trained on it may have seen them, so its learning curve on them measures memory as much as learning.";
  }

  function checker(form, box) {
    let asked = 0;
    return async function check() {
      const params = new URLSearchParams();
      BENCHMARKS.forEach(function (name) {
        chosen(form, name).forEach(function (v) { params.append(name, v); });
      });
      const corpus = value(form, "corpus");
      const mine = ++asked;
      if (!corpus || !params.toString()) {
        show(box, "Choose suites, minimal-pair sets or probing tasks to check the corpus against them.", false, []);
        return;
      }
      show(box, "Checking the corpus " + corpus + "…", false, []);
      const address = box.dataset.api.replace("CORPUS", encodeURIComponent(corpus)) + "?" + params.toString();
      try {
        const response = await fetch(address, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        const body = await response.json();
        if (mine !== asked) return;
        if (!response.ok) {
          show(box, (body.errors || []).map(function (e) { return e.message; }).join("; "), true, []);
          return;
        }
        show(box, summary(body), body.found > 0 || Boolean(body.error), body.benchmarks);
      } catch (e) {
        if (mine === asked) show(box, "The check could not be run; change a choice to try again.", true, []);
      }
    };
  }

  function start() {
    const form = document.getElementById("training-form");
    if (!form) return;
    showGroups(form);
    const box = document.getElementById("corpus-check");
    const check = box ? checker(form, box) : null;
    let timer = null;
    form.addEventListener("change", function (event) {
      const name = event.target.name;
      if (name === "kind" || name === "preset") showGroups(form);
      if (check && (name === "corpus" || name === "kind" || BENCHMARKS.indexOf(name) >= 0)) {
        clearTimeout(timer);
        timer = setTimeout(check, WAIT_MS);
      }
    });
    if (check) check();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
