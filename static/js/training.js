// A training run's page: the loss curve (train and validation, updated while the run
// trains), the learning curves (accuracy per benchmark against tokens seen, log axis, with
// each one's chance level; updated as the checkpoints' evaluations finish, also after the
// training is done) and an estimate of the time left. Data: json_script "training-data";
// live: the run's API.
(function () {
  "use strict";
  const POLL_MS = 3000;
  const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
  let lossChart = null;
  let learningChart = null;

  function points(pairs) {
    return pairs.map(function (p) { return { x: p[0], y: p[1] }; });
  }

  function drawLoss(loss) {
    const canvas = document.getElementById("loss-plot");
    if (!canvas || !window.Chart) return;
    const datasets = [
      { label: "Training loss", data: points(loss.train), borderColor: COLOURS[0], backgroundColor: COLOURS[0], pointRadius: 0, borderWidth: 1.5 },
      { label: "Validation loss", data: points(loss.validation), borderColor: COLOURS[1], backgroundColor: COLOURS[1], pointRadius: 4, pointStyle: "triangle", borderWidth: 2 },
    ];
    if (lossChart) {
      lossChart.data.datasets[0].data = datasets[0].data;
      lossChart.data.datasets[1].data = datasets[1].data;
      lossChart.update();
      return;
    }
    lossChart = lineChart(canvas, datasets, {
      x: { type: "linear", title: { display: true, text: "Tokens seen" } },
      y: { title: { display: true, text: "Loss (nats per token)" } },
    }, []);
  }

  // Both plots: lines of {x, y} points, drawn at once (no animation) to fill their box.
  function lineChart(canvas, datasets, scales, plugins) {
    return new window.Chart(canvas, {
      type: "line",
      data: { datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false, parsing: false, scales: scales,
        // Chance lines are explained by the caption, not the legend.
        plugins: { legend: { labels: { filter: function (item, data) { return !data.datasets[item.datasetIndex].chance; } } } },
      },
      plugins: plugins,
    });
  }

  // A benchmark's points with an accuracy, and its chance level as a dashed line across
  // the checkpoints' tokens (in its colour, out of the legend).
  function learningDatasets(learning) {
    const tokens = [];
    learning.suites.forEach(function (row) {
      row.points.forEach(function (p) { tokens.push(p.tokens); });
    });
    const datasets = [];
    learning.suites.forEach(function (row, i) {
      const colour = COLOURS[i % COLOURS.length];
      datasets.push({
        label: row.label || row.suite,
        data: row.points.filter(function (p) { return p.accuracy !== null; })
          .map(function (p) { return { x: p.tokens, y: p.accuracy }; }),
        borderColor: colour,
        backgroundColor: colour,
        pointRadius: 3,
        borderWidth: 2,
      });
      if (row.chance !== null && row.chance !== undefined && tokens.length) {
        datasets.push({
          label: (row.label || row.suite) + ": chance",
          chance: true,
          data: [{ x: Math.min.apply(null, tokens), y: row.chance }, { x: Math.max.apply(null, tokens), y: row.chance }],
          borderColor: colour,
          backgroundColor: colour,
          borderDash: [6, 4],
          borderWidth: 1,
          pointRadius: 0,
        });
      }
    });
    // A series' seeds (docs/series.md): each benchmark's mean over the seeds, and the
    // band from the lowest to the highest seed (out of the legend, as chance lines are).
    (learning.seeds || []).forEach(function (row, i) {
      const colour = COLOURS[(learning.suites.length + i) % COLOURS.length];
      const at = function (key) {
        return row.points.map(function (p) { return { x: p.tokens, y: p[key] }; });
      };
      datasets.push({ label: row.benchmark + ": lowest seed", chance: true, data: at("low"), borderWidth: 0, pointRadius: 0, fill: false });
      datasets.push({ label: row.benchmark + ": highest seed", chance: true, data: at("high"), borderWidth: 0, pointRadius: 0, fill: "-1", backgroundColor: colour + "33" });
      datasets.push({ label: row.benchmark + " (mean of " + row.seeds + " seeds)", data: at("mean"), borderColor: colour, backgroundColor: colour, pointRadius: 3, borderWidth: 2 });
    });
    return datasets;
  }

  function drawLearning(learning) {
    const canvas = document.getElementById("learning-plot");
    if (!canvas || !window.Chart) return;
    const datasets = learningDatasets(learning);
    if (learningChart) {
      learningChart.data.datasets = datasets;
      learningChart.update();
      return;
    }
    learningChart = lineChart(canvas, datasets, {
      x: { type: "logarithmic", title: { display: true, text: (learning.axis || "Tokens seen") + " (log scale)" } },
      y: { min: 0, max: 1, title: { display: true, text: "Accuracy" } },
    }, [{
      id: "threshold",
      afterDatasetsDraw: function (chart) {
        const y = chart.scales.y.getPixelForValue(learning.threshold);
        const ctx = chart.ctx;
        ctx.save();
        ctx.strokeStyle = "#888888";
        ctx.setLineDash([4, 4]);
        ctx.beginPath();
        ctx.moveTo(chart.chartArea.left, y);
        ctx.lineTo(chart.chartArea.right, y);
        ctx.stroke();
        ctx.restore();
      },
    }]);
  }

  // The table under the chart: each point's accuracy (or status) and the age of acquisition.
  function fillTable(learning) {
    learning.suites.forEach(function (row, i) {
      const tr = document.querySelector('tr[data-curve="' + i + '"]');
      if (!tr) return;
      row.points.forEach(function (p, j) {
        const td = tr.querySelector('td[data-point="' + j + '"]');
        if (!td) return;
        const shown = document.createElement(p.accuracy !== null && p.url ? "a" : "span");
        if (p.accuracy !== null) {
          shown.textContent = p.accuracy.toFixed(3);
          if (p.url) shown.href = p.url;
        } else {
          shown.textContent = p.status;
          shown.className = "muted small";
        }
        td.replaceChildren(shown);
      });
      const age = tr.querySelector("td[data-age]");
      if (age) age.textContent = row.age_of_acquisition === null ? "—" : String(row.age_of_acquisition);
    });
  }

  // Whether a checkpoint's evaluation is still to finish: the page keeps asking, also
  // once the training itself is done.
  function evaluating(learning) {
    return learning.suites.some(function (row) {
      return row.points.some(function (p) { return p.status === "queued" || p.status === "running"; });
    });
  }

  function timeLeft(data) {
    const out = document.getElementById("time-left");
    if (!out || data.status !== "running" || !data.started_at || !data.progress_done) {
      if (out) out.textContent = "";
      return;
    }
    const elapsed = (Date.now() - Date.parse(data.started_at)) / 1000;
    const left = elapsed / data.progress_done * (data.progress_total - data.progress_done);
    const minutes = Math.round(left / 60);
    out.textContent = minutes >= 1 ? "about " + minutes + " min left" : "less than a minute left";
  }

  async function poll(section) {
    try {
      const response = await fetch(section.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        const data = await response.json();
        drawLoss(data.loss);
        drawLearning(data.learning_curves);
        fillTable(data.learning_curves);
        timeLeft(data);
        const finished = data.status === "done" || data.status === "failed" || data.status === "cancelled";
        if (finished && !evaluating(data.learning_curves)) return;
      }
    } catch (e) { /* retried on the next tick */ }
    setTimeout(function () { poll(section); }, POLL_MS);
  }

  function start() {
    const source = document.getElementById("training-data");
    if (!source || !window.Chart) return;
    const data = JSON.parse(source.textContent);
    drawLoss(data.loss);
    drawLearning(data.learning);
    const section = document.getElementById("training-status");
    if (section && (section.dataset.finished === "0" || evaluating(data.learning))) {
      setTimeout(function () { poll(section); }, POLL_MS);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
