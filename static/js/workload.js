// Draws the workload page's charts with plotly. Data comes from json_script tags only:
// "history-data" (in the page) and "chart-data" (in the charts fragment htmx loads).
(function () {
  "use strict";

  const MI = 1024 * 1024;

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function layout(title, xTitle, yTitle, extra) {
    const text = css("--text");
    const grid = css("--border");
    return Object.assign({
      title: { text: title, font: { size: 13 } },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: text, size: 11 },
      margin: { l: 55, r: 15, t: 35, b: 45 },
      xaxis: { title: { text: xTitle }, gridcolor: grid, zerolinecolor: grid },
      yaxis: { title: { text: yTitle }, gridcolor: grid, zerolinecolor: grid, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
      showlegend: true,
    }, extra || {});
  }

  function draw(node, traces, lay) {
    node.textContent = "";
    window.Plotly.newPlot(node, traces, lay, { displaylogo: false, responsive: true });
  }

  function note(node, text) {
    node.textContent = "";
    const p = document.createElement("p");
    p.className = "muted";
    p.textContent = text;
    node.appendChild(p);
  }

  // A vertical marker; labels are staggered (row) so neighbours don't overlap.
  function vline(x, color, dash, label, row) {
    return {
      x: x,
      shape: { type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
               line: { color: color, dash: dash, width: 2 } },
      annotation: { x: x, xref: "x", y: 1 - 0.08 * (row || 0), yref: "paper", text: label,
                    showarrow: false, xanchor: "left", yanchor: "top",
                    bgcolor: css("--panel"), font: { color: color, size: 10 } },
    };
  }

  // One resource's distribution: bars of decayed weight, percentiles, request, target band.
  // Buckets grow exponentially; bars span [start, next start) on a linear axis.
  function drawDistribution(node, dist, box, resource) {
    if (!dist || !dist.bucket_start.length) {
      note(node, "No usage distribution yet: it appears after the first samples are ingested.");
      return;
    }
    const scale = resource === "cpu" ? 1 : 1 / MI;  // cores, or MiB
    const toUnit = resource === "cpu" ? (m) => m / 1000 : (b) => b / MI;
    const unit = resource === "cpu" ? "cores" : "MiB";
    const starts = dist.bucket_start.map((x) => x * scale);
    const widths = starts.map((x, i) => (i + 1 < starts.length ? starts[i + 1] - x : x * 0.05 || 1));
    const marks = [];
    const colors = { p50: css("--muted"), p90: css("--accent"), p95: css("--warn") };
    // Percentiles that fall in the same bucket share one line and one label
    // ("p90 = p95"): two labels on one line would be drawn over each other.
    const groups = [];
    for (const [name, value] of Object.entries(dist.percentiles).sort((a, b) => a[1] - b[1])) {
      const last = groups[groups.length - 1];
      if (last && last.value === value) last.names.push(name);
      else groups.push({ value: value, names: [name] });
    }
    for (const group of groups) {
      const top = group.names[group.names.length - 1];
      marks.push(vline(group.value * scale, colors[top] || css("--muted"), "dot",
                       group.names.join(" = "), marks.length));
    }
    const request = box["request_" + resource];
    const target = box["target_" + resource];
    const lower = box["lower_" + resource];
    const upper = box["upper_" + resource];
    if (request !== null && request !== undefined) {
      marks.push(vline(toUnit(request), css("--bad"), "solid", "request", marks.length));
    }
    if (target !== null && target !== undefined) {
      marks.push(vline(toUnit(target), css("--good"), "dash", "target", marks.length));
    }
    const shapes = marks.map((m) => m.shape);
    const xs = starts.concat([starts[starts.length - 1] + widths[widths.length - 1]]);
    if (lower !== null && upper !== null && lower !== undefined && upper !== undefined) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: toUnit(lower), x1: toUnit(upper),
                    y0: 0, y1: 1, fillcolor: css("--good"), opacity: 0.12, line: { width: 0 } });
      xs.push(toUnit(lower), toUnit(upper));
    }
    marks.forEach((m) => xs.push(m.x));
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    const pad = (hi - lo) * 0.05 || hi * 0.1 || 1;
    draw(node, [{ type: "bar", x: starts, y: dist.weight, width: widths, offset: 0,
                  name: "decayed weight", marker: { color: css("--accent") }, opacity: 0.75 }],
         layout(resource === "cpu" ? "CPU usage distribution" : "Memory peak distribution",
                unit, "weight", { shapes: shapes, annotations: marks.map((m) => m.annotation),
                                   xaxis: { title: { text: unit }, gridcolor: css("--border"),
                                            range: [Math.max(0, lo - pad), hi + pad] } }));
  }

  function flat(t, value) {
    return t.map(() => value);
  }

  // Hourly usage (max and mean of the pods' one-minute samples) with request, target
  // and the lower-upper band, OOM kills marked.
  function drawUsage(node, usage, box, resource, ooms) {
    if (!usage || !usage.t.length) {
      note(node, "No usage stored for this container in the last 8 days yet: the refresh " +
                 "stores it hour by hour as it reads samples.");
      return;
    }
    const scale = resource === "cpu" ? 1 : 1 / MI;
    const toUnit = resource === "cpu" ? (m) => m / 1000 : (b) => b / MI;
    const unit = resource === "cpu" ? "cores" : "MiB";
    const max = usage[resource + "_max"].map((v) => (v === null ? null : v * scale));
    const mean = usage[resource + "_mean"].map((v) => (v === null ? null : v * scale));
    const traces = [];
    const lower = box["lower_" + resource];
    const upper = box["upper_" + resource];
    if (lower !== null && upper !== null && lower !== undefined && upper !== undefined) {
      traces.push({ x: usage.t, y: flat(usage.t, toUnit(lower)), mode: "lines", name: "lower bound",
                    line: { color: css("--good"), width: 0 }, showlegend: false, hoverinfo: "skip" });
      traces.push({ x: usage.t, y: flat(usage.t, toUnit(upper)), mode: "lines", name: "lower–upper bound",
                    fill: "tonexty", fillcolor: "rgba(98,199,141,0.15)", line: { color: css("--good"), width: 0 } });
    }
    traces.push({ x: usage.t, y: max, mode: "lines", name: "hourly max over pods", line: { color: css("--accent"), width: 1.5 } });
    traces.push({ x: usage.t, y: mean, mode: "lines", name: "hourly mean over pods", line: { color: css("--muted"), width: 1 } });
    const request = box["request_" + resource];
    const target = box["target_" + resource];
    if (request !== null && request !== undefined) {
      traces.push({ x: usage.t, y: flat(usage.t, toUnit(request)), mode: "lines", name: "request",
                    line: { color: css("--bad"), width: 2 } });
    }
    if (target !== null && target !== undefined) {
      traces.push({ x: usage.t, y: flat(usage.t, toUnit(target)), mode: "lines", name: "target",
                    line: { color: css("--good"), width: 2, dash: "dash" } });
    }
    const extra = {};
    if (resource === "memory" && ooms && ooms.length) {
      // OOM kills happen at the limit, on the request and usage lines: their markers go
      // in a strip above every line, so nothing they mark is hidden.
      const values = traces.flatMap((t) => t.y).filter((v) => v !== null && v !== undefined);
      const top = Math.max(...values, 0) || 1;
      traces.push({ x: ooms, y: ooms.map(() => top * 1.1), mode: "markers", name: "OOM kill",
                    hovertemplate: "OOM kill %{x}<extra></extra>",
                    marker: { symbol: "triangle-down", size: 9, color: css("--bad") } });
      extra.yaxis = { title: { text: unit }, gridcolor: css("--border"),
                      zerolinecolor: css("--border"), range: [0, top * 1.18] };
    }
    draw(node, traces, layout(resource === "cpu" ? "CPU usage" : "Memory working set", "", unit, extra));
  }

  function drawHistory(node, history, resource) {
    const toUnit = resource === "cpu" ? (m) => (m === null ? null : m / 1000)
                                      : (b) => (b === null ? null : b / MI);
    const unit = resource === "cpu" ? "cores" : "MiB";
    const traces = [
      { x: history.t, y: history["lower_" + resource].map(toUnit), mode: "lines", line: { shape: "hv", width: 0 },
        showlegend: false, hoverinfo: "skip", name: "lower bound" },
      { x: history.t, y: history["upper_" + resource].map(toUnit), mode: "lines", line: { shape: "hv", width: 0 },
        fill: "tonexty", fillcolor: "rgba(98,199,141,0.15)", name: "lower–upper bound" },
      { x: history.t, y: history["target_" + resource].map(toUnit), mode: "lines+markers",
        line: { shape: "hv", color: css("--good") }, name: "target" },
    ];
    draw(node, traces, layout(resource === "cpu" ? "CPU recommendation over time" : "Memory recommendation over time", "", unit));
  }

  function drawHistories() {
    const data = readJson("history-data");
    if (!data) return;
    document.querySelectorAll("[data-chart^='history-']").forEach((node) => {
      const history = data[node.dataset.container];
      if (history) drawHistory(node, history, node.dataset.chart.slice("history-".length));
    });
  }

  function drawCharts() {
    const data = readJson("chart-data");
    if (!data) return;
    document.querySelectorAll("#charts [data-chart]").forEach((node) => {
      const name = node.dataset.container;
      const [kind, resource] = node.dataset.chart.split("-");
      const box = data.containers[name] || {};
      if (kind === "dist") {
        drawDistribution(node, (data.distributions[name] || {})[resource], box, resource);
      } else if (kind === "usage") {
        drawUsage(node, data.usage[name], box, resource, box.ooms);
      }
    });
    document.body.dataset.chartsReady = "true";
  }

  document.addEventListener("DOMContentLoaded", drawHistories);
  document.addEventListener("htmx:afterSettle", (event) => {
    if (!event.target) return;
    if (event.target.id === "charts") drawCharts();
    // The page's live part was re-read: its history charts are new, empty boxes.
    if (event.target.id === "workload-live") drawHistories();
  });
})();
