// The live fan-out's SVG, from a layout (fanlayout.js): client rows and brokers as focusable
// nodes, one path per edge coloured by role (console.css: svg.fanout .ROLE), classes for
// what just happened on it (opened, closed, error, rerouted), and requests since the last
// look drawn as dots travelling to the broker (none when motion is reduced).
import { brokerState } from "./cluster.js";

const SVG = "http://www.w3.org/2000/svg";
const MAX_PULSES = 240;   // dots in the whole picture, the busiest edges first

function node(tag, attrs, text) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

const titled = (n, text) => { n.append(node("title", {}, text)); return n; };

// An edge's marks: the union of its connections' (marks: connection key -> Set of classes).
function marksOf(e, marks) {
  const out = new Set();
  for (const c of e.conns) for (const m of marks.get(`${c.broker}:${c.connection_id}`) ?? []) out.add(m);
  if (e.ghost) out.add("closed");
  return out;
}

function edgeTitle(e) {
  const n = e.conns.length;
  const parts = [...new Set(e.conns.flatMap((c) => c.partitions ?? []))];
  const who = e.agg ? `${n} connection${n === 1 ? "" : "s"} of ${e.row.label.slice(2)}` : `connection ${e.conns[0].connection_id} of ${e.row.label}`;
  return `${who} → broker ${e.broker}: ${e.role}${e.ghost ? " (closed)" : ""}${parts.length ? ` (${parts.join(" ")})` : ""}`;
}

// state: {marks, deltas (connection key -> requests since the last look), still, focus
// (a broker id whose edges stand out, or null), period (ms between looks)}
export function draw(lay, state) {
  const { marks, deltas, still, focus, period } = state;
  const svg = node("svg", { class: `fanout live${focus === null || focus === undefined ? "" : " has-focus"}`, width: lay.width, height: lay.height,
    viewBox: `0 0 ${lay.width} ${lay.height}`, role: "group", "aria-label": "live fan-out: clients, their connections and the brokers",
    "data-motion": still ? "off" : "on", "data-clients": lay.clients, "data-rows": lay.rows.length });
  const edges = node("g", { class: "edges" });
  const pulses = node("g", { class: "pulses", "aria-hidden": "true" });
  const busy = [];
  for (const e of lay.edges) {
    const cls = ["edge", e.role, ...(e.agg ? ["agg"] : []), ...marksOf(e, marks)];
    const delta = e.conns.reduce((n, c) => n + (deltas.get(`${c.broker}:${c.connection_id}`) ?? 0), 0);
    if (delta > 0) cls.push("busy");
    if (focus !== null && focus !== undefined && e.broker === focus) cls.push("hl");
    const single = e.conns.length === 1 && !e.agg ? e.conns[0] : null;
    const path = titled(node("path", { d: e.d, class: cls.join(" "), "data-role": e.role, "data-broker": e.broker,
      "data-row": e.row.key, "data-count": e.conns.length, "data-requests": delta,
      "data-conn": single ? single.connection_id : null, "data-partitions": single ? (single.partitions ?? []).join(" ") : null,
      "stroke-width": e.agg ? (1.5 + Math.log2(e.conns.length)).toFixed(1) : null }), edgeTitle(e));
    edges.append(path);
    if (delta > 0 && !e.ghost) busy.push([delta, e]);
  }
  if (!still) {
    busy.sort((a, b) => b[0] - a[0]);
    let left = MAX_PULSES;
    for (const [delta, e] of busy) {
      const n = Math.min(3, Math.ceil(Math.log10(delta + 1) * 1.5), left);
      if (n <= 0) break;
      left -= n;
      const dur = Math.max(0.4, Math.min(period / 1000, 1.6 / Math.log2(delta + 2) * 2));
      for (let k = 0; k < n; k++) {
        const dot = node("circle", { r: 2.6, class: `pulse ${e.role}`, "data-broker": e.broker });
        dot.append(node("animateMotion", { path: e.d, dur: `${dur.toFixed(2)}s`, begin: `${(-k * dur / n).toFixed(2)}s`, repeatCount: "indefinite" }));
        pulses.append(dot);
      }
    }
  }
  svg.append(edges, pulses);
  for (const r of lay.rows) {
    const g = node("g", { class: `fan-row row-${r.kind}`, tabindex: 0, role: "button", "data-key": r.key, "data-kind": r.kind,
      "aria-label": r.kind === "client" ? `${r.label}: ${r.conns.length} connections; Enter opens its detail` : `${r.title}; Enter ${r.kind === "head" ? "folds" : "opens"} the group`,
      "aria-expanded": r.kind === "client" ? null : String(r.kind === "head") });
    const x = r.indent ? 14 : 4;
    g.append(node("rect", { x, y: r.y - 10, width: lay.x1 - 6 - x, height: 20, rx: 4 }));
    g.append(titled(node("text", { class: "label", x: x + 6, y: r.y + 4 }, r.text), r.title));
    if (r.kind !== "head") g.append(node("text", { class: "count", x: lay.x1 - 8, y: r.y + 4, "text-anchor": "end" }, String(r.conns.filter((c) => !c.ghost).length)));
    svg.append(g);
  }
  const bx = lay.width - 190;
  for (const b of lay.brokers) {
    const st = b.broker ? brokerState(b.broker) : "down";
    const n = lay.edges.filter((e) => e.broker === b.id && !e.ghost).reduce((s, e) => s + e.conns.length, 0);
    const name = `broker ${b.id}${b.broker ? ` ${b.broker.host}:${b.broker.port}` : ""}`;
    const g = node("g", { class: `fan-broker${focus === b.id ? " focused" : ""}`, tabindex: 0, role: "button", "data-broker": b.id, "data-state": st,
      "aria-label": `${name}: ${st}, ${n} client connections; Enter picks out its edges`, "aria-pressed": String(focus === b.id) });
    g.append(node("rect", { x: bx, y: b.y - 13, width: 180, height: 26, rx: 4, class: `broker${st === "up" ? "" : ` ${st === "down" ? "down" : "isolated"}`}` }));
    g.append(node("text", { x: bx + 8, y: b.y + 4 }, `${name}${st === "up" ? "" : ` (${st})`} · ${n}`));
    svg.append(g);
  }
  return svg;
}
