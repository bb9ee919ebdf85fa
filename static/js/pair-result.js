// Minimal-pair result page: the bar chart of accuracy per condition with 95% Wilson
// intervals (data from json_script "pair-plot-data"; Chart.js and
// chartjs-chart-error-bars from node_modules), a click on a bar lists its pairs, and the
// condition filter applies as soon as a condition is chosen (its button stays for
// pages without JavaScript).
(function () {
  "use strict";

  const BAR = "#0072B2";  // Okabe-Ito blue, as on the suites' plot
  const CHANCE = "#5f6b7a";

  function listGroup(number) {
    const params = new URLSearchParams(window.location.search);
    params.set("cond", String(number));
    params.delete("page");
    window.location.assign("?" + params.toString() + "#h-pairs");
  }

  // A dashed horizontal line at chance level (0.5), drawn after the bars.
  const chanceLine = {
    id: "chanceLine",
    afterDatasetsDraw: function (chart) {
      const y = chart.scales.y.getPixelForValue(0.5);
      const area = chart.chartArea;
      const ctx = chart.ctx;
      ctx.save();
      ctx.setLineDash([6, 4]);
      ctx.strokeStyle = CHANCE;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(area.left, y);
      ctx.lineTo(area.right, y);
      ctx.stroke();
      ctx.restore();
    },
  };

  function draw() {
    const canvas = document.getElementById("pair-plot");
    const source = document.getElementById("pair-plot-data");
    if (!canvas || !source || !window.Chart) return;
    const plot = JSON.parse(source.textContent);
    const bars = plot.bars;
    const chart = new window.Chart(canvas, {
      type: "barWithErrorBars",
      data: {
        labels: bars.map(function (b) { return b.label; }),
        datasets: [{
          label: "accuracy",
          data: bars.map(function (b) { return { y: b.y, yMin: b.yMin, yMax: b.yMax }; }),
          backgroundColor: BAR + "b3",
          borderColor: BAR,
          borderWidth: 1,
          errorBarColor: "#1d2430",
          errorBarWhiskerColor: "#1d2430",
          errorBarWhiskerSize: 10,
          errorBarLineWidth: 1.5,
          maxBarThickness: 70,
        }],
      },
      plugins: [chanceLine],
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        onClick: function (event, elements) {
          if (elements.length) listGroup(elements[0].index + 1);
        },
        scales: {
          x: { title: { display: true, text: "condition" }, ticks: { autoSkip: bars.length > 40, maxRotation: 50 } },
          y: { min: 0, max: 1, title: { display: true, text: "accuracy (share of pairs)" } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            callbacks: {
              label: function (ctx) {
                const b = bars[ctx.dataIndex];
                return b.passed + " of " + b.n + " pairs: " + b.y.toFixed(3) +
                  " [" + b.yMin.toFixed(3) + ", " + b.yMax.toFixed(3) + "] (" + plot.interval + ")";
              },
            },
          },
        },
      },
    });
    canvas.dataset.drawn = String(chart.data.labels.length);
  }

  function filterOnChange() {
    const form = document.querySelector("[data-condition-filter]");
    if (!form) return;
    const select = form.querySelector("select[name=cond]");
    select.addEventListener("change", function () { form.requestSubmit(); });
  }

  function start() { draw(); filterOnChange(); }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
