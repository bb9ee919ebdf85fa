// Region-by-region surprisal plot of a result page: one line per condition across the
// regions in order, each point the mean over items with its 95% interval as an error bar.
// Each condition has its own marker and a small horizontal offset (both from the page's
// data), so that conditions with equal means do not hide one another; regions without a
// value have no point (the line breaks there), never a point at 0.
// Data comes from the page (json_script "plot-data"); Chart.js and
// chartjs-chart-error-bars are served from node_modules as UMD builds.
(function () {
  "use strict";

  // Okabe-Ito: distinguishable with the common colour-vision deficiencies.
  const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

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
        data: series.points.map(function (p, region) {
          const x = region + (series.offset || 0);
          return p ? { x: x, y: p.y, yMin: p.yMin, yMax: p.yMax, n: p.n, region: region } : { x: x, y: null };
        }),
        borderColor: colour,
        backgroundColor: colour,
        errorBarColor: colour,
        errorBarWhiskerColor: colour,
        errorBarWhiskerSize: 8,
        errorBarLineWidth: 1.5,
        pointStyle: series.marker || "circle",
        pointRadius: 4,
        pointHoverRadius: 6,
        borderWidth: 2,
        spanGaps: false,
      };
    });

    const chart = new window.Chart(canvas, {
      type: "lineWithErrorBars",
      data: { datasets: datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: {
            type: "linear",
            min: -0.5,
            max: plot.regions.length - 0.5,
            title: { display: true, text: "region" },
            grid: { display: false },
            // One tick per region, at the region's centre (the points sit around it).
            afterBuildTicks: function (axis) {
              axis.ticks = plot.regions.map(function (_label, i) { return { value: i }; });
            },
            ticks: {
              autoSkip: false,
              maxRotation: 35,
              callback: function (value) {
                return Number.isInteger(value) && value < plot.regions.length ? plot.regions[value] : "";
              },
            },
          },
          y: { title: { display: true, text: "surprisal (bits)" } },
        },
        plugins: {
          legend: { position: "top", labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              title: function (items) {
                return items.length && items[0].raw.region !== undefined ? plot.regions[items[0].raw.region] : "";
              },
              label: function (ctx) {
                const p = ctx.raw;
                if (!p || p.y === null) return ctx.dataset.label + ": no value";
                return ctx.dataset.label + ": " + p.y.toFixed(2) + " bits [" + p.yMin.toFixed(2) +
                  ", " + p.yMax.toFixed(2) + "], n=" + p.n;
              },
            },
          },
        },
      },
    });
    canvas.dataset.ready = String(chart.data.datasets.length);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
