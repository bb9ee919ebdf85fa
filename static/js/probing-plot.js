// Probe accuracy by layer: te solid, va dashed, the layer chosen on va ringed, the
// seeds' spread as a band around te (mean +- one sd), the control task's te accuracy
// dotted, the majority, length and frequency baselines as horizontal lines, and
// optionally another run's curve (a control model) in grey. Every canvas with data-probing-plot="<json_script id>" gets
// one chart; data-compact="1" draws the small multiples of a model's page.
(function () {
  "use strict";

  const TE = "#0072B2";
  const VA = "#56B4E9";
  const MAJORITY = "#6b7280";
  const LENGTH = "#D55E00";
  const CONTROL = "#9aa5b1";
  const FREQUENCY = "#009E73";
  const CONTROL_TASK = "#CC79A7";
  const BAND = "rgba(0, 114, 178, 0.18)";
  const BAND_LABEL = "te ± sd (seeds)";

  function flat(value, n) {
    return Array.from({ length: n }, function () { return value; });
  }

  function line(label, data, colour, extra) {
    return Object.assign({
      label: label, data: data, borderColor: colour, backgroundColor: colour,
      borderWidth: 2, pointRadius: 2, tension: 0, spanGaps: false,
    }, extra || {});
  }

  function datasets(plot, compact) {
    const n = plot.layers.length;
    // The chosen layer gets a ring: a larger hollow point on the te curve.
    const radius = plot.layers.map(function (l) { return l === plot.best_layer ? (compact ? 5 : 8) : (compact ? 1.5 : 3); });
    const sets = [
      line("te" + (compact ? "" : " (" + plot.label + ")"), plot.te, TE, {
        pointRadius: radius, pointBackgroundColor: plot.layers.map(function (l) { return l === plot.best_layer ? "#fff" : TE; }),
        pointBorderWidth: plot.layers.map(function (l) { return l === plot.best_layer ? 3 : 1; }),
      }),
      line("va", plot.va, VA, { borderDash: [6, 4], pointRadius: compact ? 0 : 2 }),
    ];
    const std = plot.te_std || [];
    if (plot.seeds > 1 && std.some(function (v) { return v !== null && v !== undefined; })) {
      // Two invisible edges; the lower one fills up to the upper one.
      const edge = function (sign) {
        return plot.te.map(function (v, i) { return std[i] === null || std[i] === undefined ? null : v + sign * std[i]; });
      };
      sets.push(line(BAND_LABEL, edge(1), BAND, { borderWidth: 0, pointRadius: 0, fill: false }));
      sets.push(line(BAND_LABEL, edge(-1), BAND, { borderWidth: 0, pointRadius: 0, fill: "-1", backgroundColor: BAND }));
    }
    const control = plot.control_te || [];
    if (control.some(function (v) { return v !== null && v !== undefined; })) {
      sets.push(line("control task (te)", control, CONTROL_TASK, { borderDash: [1, 3], pointRadius: compact ? 0 : 2 }));
    }
    if (plot.frequency !== null && plot.frequency !== undefined) {
      sets.push(line("frequency baseline", flat(plot.frequency, n), FREQUENCY, { borderDash: [2, 3], pointRadius: 0, borderWidth: 1.5 }));
    }
    if (plot.majority !== null) {
      sets.push(line("majority baseline", flat(plot.majority, n), MAJORITY, { borderDash: [2, 3], pointRadius: 0, borderWidth: 1.5 }));
    }
    if (plot.length !== null) {
      sets.push(line("length baseline", flat(plot.length, n), LENGTH, { borderDash: [2, 3], pointRadius: 0, borderWidth: 1.5 }));
    }
    if (plot.control) {
      const c = plot.control;
      // The control may have another number of layers: pad or cut to this run's.
      const te = plot.layers.map(function (l) { return l < c.te.length ? c.te[l] : null; });
      sets.push(line("te (" + c.label + ")", te, CONTROL, { borderDash: [8, 4], pointRadius: 2 }));
    }
    return sets;
  }

  function draw(canvas) {
    const source = document.getElementById(canvas.dataset.probingPlot);
    if (!source || !window.Chart) return;
    const plot = JSON.parse(source.textContent);
    const compact = canvas.dataset.compact === "1";
    new window.Chart(canvas, {
      type: "line",
      data: { labels: plot.layers, datasets: datasets(plot, compact) },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { title: { display: !compact, text: "layer (0 = embeddings)" }, ticks: { autoSkip: true, maxTicksLimit: compact ? 6 : 25 } },
          y: { title: { display: !compact, text: "accuracy" }, suggestedMin: 0, suggestedMax: 1 },
        },
        plugins: {
          // The band's two edges share one legend entry.
          legend: {
            display: !compact, position: "top",
            labels: { filter: function (item, data) { return !(item.text === BAND_LABEL && data.datasets[item.datasetIndex + 1] && data.datasets[item.datasetIndex + 1].label === BAND_LABEL); } },
          },
          tooltip: {
            callbacks: {
              title: function (items) {
                const layer = items[0].label;
                return "layer " + layer + (Number(layer) === plot.best_layer ? " (chosen on va)" : "");
              },
              label: function (ctx) {
                if (ctx.dataset.label === BAND_LABEL) return null;
                return ctx.raw === null || ctx.raw === undefined ? ctx.dataset.label + ": —" : ctx.dataset.label + ": " + ctx.raw.toFixed(3);
              },
            },
          },
        },
      },
    });
  }

  function drawAll() {
    document.querySelectorAll("canvas[data-probing-plot]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
