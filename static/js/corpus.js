// A corpus's line lengths: a bar chart from the page's json_script "length-data"
// ({labels: ["1", "2", ..., "17-32", ...], counts: [...]}).
(function () {
  "use strict";

  function draw() {
    const canvas = document.getElementById("length-plot");
    const source = document.getElementById("length-data");
    if (!canvas || !source || !window.Chart) return;
    const data = JSON.parse(source.textContent);
    new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: [{ label: "Lines", data: data.counts, backgroundColor: "#0072B2" }],
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        plugins: { legend: { display: false } },
        scales: {
          x: { title: { display: true, text: "Words per line" } },
          y: { title: { display: true, text: "Lines" }, beginAtZero: true },
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
