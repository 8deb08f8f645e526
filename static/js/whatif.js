// Draws the what-if page's charts with plotly: per container and resource, the hourly
// peak of usage and both profiles' target and bounds. Data: the "what-if-data" json_script.
(function () {
  "use strict";

  const MI = 1024 * 1024;

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function line(x, y, name, color, dash, width) {
    return { x: x, y: y, name: name, type: "scatter", mode: "lines",
             line: { color: color, dash: dash || "solid", width: width || 2 } };
  }

  function drawOne(node, chart, resource) {
    const scale = resource === "cpu" ? (v) => (v === null ? null : v / 1000)
                                     : (v) => (v === null ? null : v / MI);
    const unit = resource === "cpu" ? "cores" : "MiB";
    const x = chart.t;
    const colors = [css("--accent") || "#1f77b4", css("--warn") || "#ff7f0e"];
    const traces = [line(x, chart["usage_" + resource].map(scale), "usage (hourly peak)",
                         css("--muted") || "#888", "solid", 1)];
    ["current", "candidate"].forEach(function (key, i) {
      const values = chart[key];
      const label = chart.labels[i];
      traces.push(line(x, values["target_" + resource].map(scale), label + " target", colors[i]));
      traces.push(line(x, values["lower_" + resource].map(scale), label + " lower", colors[i], "dot", 1));
      traces.push(line(x, values["upper_" + resource].map(scale), label + " upper", colors[i], "dash", 1));
    });
    // The upper bound starts far above usage (little history yet): scale the axis to
    // usage and the targets, so the part that matters stays readable.
    let top = 0;
    traces.forEach(function (t) {
      if (/upper$/.test(t.name)) { return; }
      t.y.forEach(function (v) { if (v !== null && v > top) { top = v; } });
    });
    const grid = css("--border");
    node.textContent = "";
    window.Plotly.newPlot(node, traces, {
      title: { text: resource === "cpu" ? "CPU" : "Memory", font: { size: 13 } },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: css("--text"), size: 11 },
      margin: { l: 55, r: 15, t: 35, b: 45 },
      xaxis: { gridcolor: grid, zerolinecolor: grid },
      yaxis: { title: { text: unit }, gridcolor: grid, zerolinecolor: grid, rangemode: "tozero",
               range: top > 0 ? [0, top * 1.3] : undefined },
      legend: { orientation: "h", y: -0.25 },
    }, { displaylogo: false, responsive: true });
    node.dataset.drawn = "true";
  }

  function drawAll() {
    const node = document.getElementById("what-if-data");
    if (!node || !window.Plotly) { return; }
    const charts = JSON.parse(node.textContent);
    document.querySelectorAll("[data-whatif-chart]").forEach(function (el) {
      const chart = charts[el.dataset.container];
      if (chart) { drawOne(el, chart, el.dataset.whatifChart); }
    });
  }

  document.addEventListener("DOMContentLoaded", drawAll);
})();
