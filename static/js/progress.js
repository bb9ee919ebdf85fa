// Live progress for evaluation pages: poll the API for every unfinished evaluation (or
// other run, at its data-api address) on the page and update its status, progress bar and
// accuracy without a reload.
(function () {
  "use strict";
  const POLL_MS = 1500;
  const FINISHED = ["done", "failed", "cancelled", "ready", "refused"];

  function update(el, data) {
    const status = el.querySelector("[data-status]");
    if (status) {
      status.textContent = data.status.charAt(0).toUpperCase() + data.status.slice(1);
      status.className = "status status-" + data.status;
    }
    const bar = el.querySelector("[data-progress]");
    if (bar) { bar.max = data.progress_total || 1; bar.value = data.progress_done; }
    const text = el.querySelector("[data-progress-text]");
    if (text) text.textContent = data.progress_text || data.progress_done + " / " + data.progress_total;
    const acc = el.querySelector("[data-accuracy]");
    if (acc) acc.textContent = data.accuracy === null ? "—" : data.accuracy.toFixed(3);
    const err = el.querySelector("[data-error]");
    if (err && data.error) { err.hidden = false; err.querySelector("[data-error-text]").textContent = data.error; }
    const waiting = el.querySelector("[data-waiting]");
    if (waiting) waiting.hidden = !(data.status === "queued" && data.enqueued === false);
    const link = el.querySelector("[data-results-link]");
    if (link && data.status === "done") link.hidden = false;
    // A run's ends, and an uploaded model's (its check: data-api names the model).
    const finished = FINISHED.includes(data.status);
    el.dataset.finished = finished ? "1" : "0";
    const cancel = el.querySelector("[data-cancel]");
    if (cancel && finished) cancel.hidden = true;
    if (finished && el.tagName === "SECTION" &&
        (data.status !== "done" || el.hasAttribute("data-reload-when-done"))) {
      // The retry button (or, on a page that shows results in place, the results) is
      // rendered by the server: reload once to show it.
      window.location.reload();
    }
  }

  async function poll() {
    const pending = document.querySelectorAll('[data-evaluation][data-finished="0"]');
    await Promise.all(Array.from(pending).map(async (el) => {
      try {
        // A page of another kind of run names its own API address (data-api).
        const address = el.dataset.api || "/api/evaluations/" + el.dataset.evaluation + "/";
        const response = await fetch(address, {
          headers: { Accept: "application/json" }, credentials: "same-origin",
        });
        if (response.ok) update(el, await response.json());
      } catch (e) { /* a missed poll is retried on the next tick */ }
    }));
    if (document.querySelector('[data-evaluation][data-finished="0"]')) setTimeout(poll, POLL_MS);
  }
  document.addEventListener("DOMContentLoaded", () => setTimeout(poll, POLL_MS));
})();
