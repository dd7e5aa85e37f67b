// Line charts over time with the vendored uPlot (a global from vendor/uplot).
import { el } from "./core.js";
import { themeColor } from "./theme.js";

const COLORS = ["#2f6fdb", "#1f8a4c", "#c62f2f", "#b8730a", "#7b3fc4", "#0f8b8d", "#d1495b", "#5c6b7a",
  "#8aa61c", "#e07a1f", "#3d5a80", "#9c27b0"];

// lineChart(box, title, names, height): set([xs, ys1, ys2...]) redraws; setSeries(names) when
// the set of lines changes (a new topic, broker or API).
export function lineChart(box, title, names, height = 200) {
  const holder = el("div.chart", { "data-chart": title });
  box.append(holder);
  let plot = null;
  let current = [];
  const make = (series) => {
    if (plot) plot.destroy();
    current = series.slice();
    const width = Math.max(320, (box.clientWidth || 800) - 20);
    plot = new window.uPlot({
      title, width, height,
      series: [{}, ...series.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
      axes: [axis({}), axis({ size: 60 })],
      scales: { x: { time: true } },
    }, [[], ...series.map(() => [])], holder);
  };
  make(names);
  const redraw = () => { if (plot) plot.redraw(false, true); };
  window.addEventListener("kaflite-theme", redraw);
  return {
    set(data) {
      plot.setData(padded(data));
    },
    setSeries(series, data) {
      if (series.length !== current.length || series.some((s, i) => s !== current[i])) make(series);
      plot.setData(padded(data));
    },
    destroy() {
      window.removeEventListener("kaflite-theme", redraw);
      if (plot) plot.destroy();
    },
  };
}

// An axis in the theme's colours (uPlot draws on a canvas: no CSS reaches it; it calls
// these on every draw, and the charts redraw when the theme changes).
function axis(opts) {
  return { ...opts, stroke: () => themeColor("--muted"),
    grid: { stroke: () => themeColor("--line"), width: 1 }, ticks: { stroke: () => themeColor("--line"), width: 1 } };
}

// uPlot stretches a time axis with a single sample over 1,000 days: give it a minute
// before that sample, with no values.
function padded(data) {
  if (data[0].length !== 1) return data;
  return data.map((col, i) => (i === 0 ? [col[0] - 60, col[0]] : [null, col[0]]));
}
