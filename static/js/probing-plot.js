// Probe accuracy by layer: te solid, va dashed, the layer chosen on va ringed, the
// majority and length baselines as horizontal lines, and optionally another run's curve
// (a control model) in grey. Every canvas with data-probing-plot="<json_script id>" gets
// one chart; data-compact="1" draws the small multiples of a model's page.
(function () {
  "use strict";

  const TE = "#0072B2";
  const VA = "#56B4E9";
  const MAJORITY = "#6b7280";
  const LENGTH = "#D55E00";
  const CONTROL = "#9aa5b1";

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
          legend: { display: !compact, position: "top" },
          tooltip: {
            callbacks: {
              title: function (items) {
                const layer = items[0].label;
                return "layer " + layer + (Number(layer) === plot.best_layer ? " (chosen on va)" : "");
              },
              label: function (ctx) {
                return ctx.raw === null ? ctx.dataset.label + ": —" : ctx.dataset.label + ": " + ctx.raw.toFixed(3);
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
