// Sentence-length distribution of a probing task: one line per label, x = words per
// sentence, y = sentences. Data comes from the page (json_script "length-data").
(function () {
  "use strict";

  // Okabe-Ito first (distinguishable with the common colour-vision deficiencies), then
  // further hues for tasks with many labels; point shapes differ too.
  const COLOURS = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
    "#882255", "#44AA99", "#999933", "#AA4499", "#117733", "#332288", "#DDCC77", "#88CCEE",
    "#661100", "#6699CC", "#888888", "#AA4466",
  ];
  const SHAPES = ["circle", "triangle", "rect", "rectRot", "crossRot", "star", "rectRounded", "cross"];

  function draw() {
    const canvas = document.getElementById("length-plot");
    const source = document.getElementById("length-data");
    if (!canvas || !source || !window.Chart) return;
    const data = JSON.parse(source.textContent);
    const datasets = data.series.map(function (series, i) {
      const colour = COLOURS[i % COLOURS.length];
      return {
        label: series.label,
        data: series.counts,
        borderColor: colour,
        backgroundColor: colour,
        pointStyle: SHAPES[i % SHAPES.length],
        pointRadius: 3,
        borderWidth: 2,
        tension: 0,
      };
    });
    new window.Chart(canvas, {
      type: "line",
      data: { labels: data.words, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { title: { display: true, text: "words per sentence" } },
          y: { title: { display: true, text: "sentences" }, beginAtZero: true },
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
