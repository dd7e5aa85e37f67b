// Charts: produce and fetch throughput per topic and per broker, request rate and errors by API.
import { ROUTES, api, el, stream } from "./core.js";
import { lineChart } from "./plot.js";

const MAX_SAMPLES = 600;

// [group, field, title]: each chart is one field of one group of the samples, a line per name.
const CHARTS = [
  ["topics", "bytes_in", "produce bytes/s per topic"],
  ["topics", "bytes_out", "fetch bytes/s per topic"],
  ["topics", "messages_in", "messages/s in per topic"],
  ["brokers", "bytes_in", "bytes/s in per broker"],
  ["brokers", "bytes_out", "bytes/s out per broker"],
  ["apis", "requests", "requests/s by API"],
  ["apis", "errors", "errors/s by API"],
];

// Samples -> [xs, ys per name] for one (group, field), names sorted.
export function columns(samples, group, fieldName) {
  const names = new Set();
  for (const s of samples) for (const n of Object.keys(s[group] || {})) names.add(n);
  const sorted = [...names].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  const data = [samples.map((s) => s.t)];
  for (const n of sorted) data.push(samples.map((s) => (s[group] && s[group][n] ? s[group][n][fieldName] ?? null : null)));
  return { names: sorted, data };
}

export function mount(root) {
  const samples = [];
  const box = el("div.row");
  root.append(el("section.card", null, el("h2", { text: "Charts" }),
    el("div.muted", { text: "per-second rates, sampled by the console" }), box));
  const charts = CHARTS.map(([group, f, title]) => {
    const holder = el("div.grow", { style: "min-width:460px" });
    box.append(holder);
    return { group, f, chart: lineChart(holder, title, [], 200) };
  });
  let pending = 0;
  function draw() {
    pending = 0;
    for (const c of charts) {
      const { names, data } = columns(samples, c.group, c.f);
      c.chart.setSeries(names, data);
    }
    root.dataset.ready = "1";
  }
  function add(s) {
    if (samples.length && s.t <= samples[samples.length - 1].t) return;
    samples.push(s);
    if (samples.length > MAX_SAMPLES) samples.shift();
    if (!pending) pending = requestAnimationFrame(draw);
  }
  let stopped = false;
  let stop = () => {};
  api("GET", ROUTES.series).then((data) => {
    data.samples.forEach(add);
    draw();
  }).finally(() => {
    if (!stopped) stop = stream({ metrics: add });
  });
  return () => {
    stopped = true;
    stop();
    charts.forEach((c) => c.chart.destroy());
  };
}
