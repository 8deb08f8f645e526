// Draws the rollups page's savings trend with plotly, from the "trend-data" json_script
// tag (no inline script: the Content-Security-Policy allows scripts from this site only).
(function () {
  "use strict";

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function draw() {
    const node = document.getElementById("savings-trend");
    const source = document.getElementById("trend-data");
    if (!node || !source || !window.Plotly) {
      return;
    }
    const data = JSON.parse(source.textContent);
    // One point draws no line: the page says when the next one is due instead.
    if (data.at.length < 2) {
      return;
    }
    const grid = css("--border");
    node.textContent = "";
    window.Plotly.newPlot(
      node,
      [
        {
          x: data.at,
          y: data.savings,
          type: "scatter",
          mode: "lines+markers",
          name: "potential / month",
          line: { color: css("--accent") },
          hovertemplate: "%{x}<br>$%{y:,.2f} / month potential<extra></extra>",
        },
        {
          x: data.at,
          y: data.realized,
          type: "scatter",
          mode: "lines+markers",
          name: "realized / month",
          line: { color: css("--good") },
          hovertemplate: "%{x}<br>$%{y:,.2f} / month realized<extra></extra>",
        },
      ],
      {
        title: { text: "Estimated savings per month", font: { size: 13 } },
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "rgba(0,0,0,0)",
        font: { color: css("--text"), size: 11 },
        margin: { l: 65, r: 15, t: 35, b: 45 },
        xaxis: { type: "date", gridcolor: grid, zerolinecolor: grid },
        yaxis: { title: { text: "USD / month" }, gridcolor: grid, zerolinecolor: grid, rangemode: "tozero" },
        showlegend: false,
      },
      { displaylogo: false, responsive: true }
    );
    node.setAttribute("data-drawn", "true");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
