// The model page's model-vs-model scatter: one point per suite both models have current
// results for (x: this model's accuracy, y: the other's), the diagonal where they are
// equal, the suite's name on hover, and a click on a point opens the item-by-item
// comparison of the two models on that suite. Data: json_script "scatter-data".
(function () {
  "use strict";

  // Axis titles and tooltips name the models; a very long name is cut short there (the
  // caption and the table below give it in full).
  function short(name) {
    return name.length > 48 ? name.slice(0, 47) + "…" : name;
  }

  function draw() {
    const canvas = document.getElementById("model-scatter");
    const source = document.getElementById("scatter-data");
    const script = document.getElementById("model-scatter-script");
    if (!canvas || !source || !window.Chart) return;
    const points = JSON.parse(source.textContent);
    const xName = short(script ? script.dataset.x : "this model");
    const yName = short(script ? script.dataset.y : "other model");

    const chart = new window.Chart(canvas, {
      type: "scatter",
      data: {
        datasets: [
          {
            label: "suites",
            data: points.map(function (p) { return { x: p.x, y: p.y, suite: p.suite, url: p.url }; }),
            backgroundColor: "rgba(0, 114, 178, 0.75)",
            borderColor: "#0072B2",
            pointRadius: 5,
            pointHoverRadius: 8,
            // Points at 0 or 1 sit on the plot's edge: draw them whole.
            clip: false,
          },
          {
            // The diagonal: both models equally accurate.
            label: "equal accuracy",
            type: "line",
            data: [{ x: 0, y: 0 }, { x: 1, y: 1 }],
            borderColor: "#9aa5b1",
            borderDash: [6, 4],
            borderWidth: 1,
            pointRadius: 0,
            pointHitRadius: 0,
            fill: false,
          },
        ],
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { min: 0, max: 1, title: { display: true, text: xName + " (accuracy)" } },
          y: { min: 0, max: 1, title: { display: true, text: yName + " (accuracy)" } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            filter: function (item) { return item.datasetIndex === 0; },
            callbacks: {
              title: function (items) { return items.length ? items[0].raw.suite : ""; },
              label: function (ctx) {
                return [xName + ": " + ctx.raw.x.toFixed(2), yName + ": " + ctx.raw.y.toFixed(2)];
              },
            },
          },
        },
        onHover: function (event, elements) {
          event.native.target.style.cursor = elements.some(function (e) { return e.datasetIndex === 0; }) ? "pointer" : "default";
        },
        onClick: function (event, elements) {
          const hit = elements.find(function (e) { return e.datasetIndex === 0; });
          if (hit) window.location.assign(points[hit.index].url);
        },
      },
    });
    canvas.dataset.ready = String(chart.data.datasets[0].data.length);
  }

  // Choosing another model redraws in place: the page the "Show" button would load
  // (the button stays for a browser without JavaScript) is fetched, its scatter section
  // replaces this one, and the address names the model, as after the button.
  let latest = 0;

  function show(select) {
    const form = select.form;
    const url = new URL(form.action, window.location.href);
    url.search = new URLSearchParams(new FormData(form)).toString();
    const asked = ++latest;
    const section = select.closest("section.scatter-section");
    section.setAttribute("aria-busy", "true");
    fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error(response.status);
        return response.text();
      })
      .then(function (html) {
        if (asked !== latest) return;
        const fresh = new DOMParser().parseFromString(html, "text/html")
          .querySelector("section.scatter-section");
        if (!fresh) throw new Error("no scatter section");
        const old = window.Chart.getChart(document.getElementById("model-scatter"));
        if (old) old.destroy();
        section.replaceWith(fresh);
        window.history.replaceState(null, "", url);
        draw();
        const again = document.getElementById("scatter-vs");
        if (again) again.focus();
      })
      .catch(function () {
        if (asked === latest) form.submit();  // the plain way, as the button does
      });
  }

  document.addEventListener("change", function (event) {
    if (event.target.id === "scatter-vs") show(event.target);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
