// Region-by-region surprisal plot of a result page: one line per condition across the
// regions in order, each point the mean over items with its 95% interval as an error bar.
// Data comes from the page (json_script "plot-data"); Chart.js and
// chartjs-chart-error-bars are served from node_modules as UMD builds.
(function () {
  "use strict";

  // Okabe-Ito: distinguishable with the common colour-vision deficiencies.
  const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
  // Point shapes differ too, so that conditions do not rely on colour alone.
  const SHAPES = ["circle", "triangle", "rect", "rectRot", "crossRot", "star", "rectRounded", "cross"];

  function draw() {
    const canvas = document.getElementById("surprisal-plot");
    const source = document.getElementById("plot-data");
    if (!canvas || !source || !window.Chart) return;
    const plot = JSON.parse(source.textContent);

    const datasets = plot.series.map(function (series, i) {
      const colour = COLOURS[i % COLOURS.length];
      return {
        label: series.condition,
        // Missing points stay null so that the line breaks there instead of inventing a value.
        data: series.points.map(function (p) {
          return p ? { y: p.y, yMin: p.yMin, yMax: p.yMax, n: p.n } : null;
        }),
        borderColor: colour,
        backgroundColor: colour,
        errorBarColor: colour,
        errorBarWhiskerColor: colour,
        errorBarWhiskerSize: 8,
        errorBarLineWidth: 1.5,
        pointStyle: SHAPES[i % SHAPES.length],
        pointRadius: 4,
        pointHoverRadius: 6,
        borderWidth: 2,
        spanGaps: false,
      };
    });

    new window.Chart(canvas, {
      type: "lineWithErrorBars",
      data: { labels: plot.regions, datasets: datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "nearest", intersect: false, axis: "x" },
        scales: {
          x: { title: { display: true, text: "region" }, ticks: { autoSkip: false, maxRotation: 35 } },
          y: { title: { display: true, text: "surprisal (bits)" } },
        },
        plugins: {
          legend: { position: "top", labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              label: function (ctx) {
                const p = ctx.raw;
                if (!p) return ctx.dataset.label + ": no value";
                return ctx.dataset.label + ": " + p.y.toFixed(2) + " bits [" + p.yMin.toFixed(2) +
                  ", " + p.yMax.toFixed(2) + "], n=" + p.n;
              },
            },
          },
        },
      },
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
