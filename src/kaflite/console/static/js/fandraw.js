// The live fan-out's SVG, from a layout (fanlayout.js): client rows and brokers as focusable
// nodes, one path per edge coloured by role (console.css: svg.fanout .ROLE), classes for
// what just happened on it (opened, closed, error, rerouted), and requests since the last
// look drawn as dots travelling to the broker (none when motion is reduced).
// One picture for the page's life: picture() makes it, paint() brings it to a layout,
// keeping each element keyed by its edge, dot, row or broker and changing only its
// attributes, so dots keep moving and flashes keep running across looks; an element gone
// from the layout fades out (class `gone`) and is removed (at once with reduced motion).
import { brokerState } from "./cluster.js";

const SVG = "http://www.w3.org/2000/svg";
const MAX_PULSES = 240;   // dots in the whole picture, the busiest edges first
const LEAVE_MS = 400;     // console.css: the `gone` fade

function node(tag, attrs = {}, text) {
  const n = document.createElementNS(SVG, tag);
  set(n, attrs);
  if (text !== undefined) n.textContent = text;
  return n;
}

// Attributes in place: null or undefined removes one, an unchanged value is not written.
function set(n, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) {
      if (n.hasAttribute(k)) n.removeAttribute(k);
    } else if (n.getAttribute(k) !== String(v)) {
      n.setAttribute(k, String(v));
    }
  }
  return n;
}

const say = (n, text) => { if (n.textContent !== text) n.textContent = text; };

// A label with a tooltip: <text>words<title>tooltip</title></text>.
function labelled(attrs) {
  const n = node("text", attrs);
  n.append(document.createTextNode(""), node("title"));
  return n;
}
function relabel(n, text, title) {
  if (n.firstChild.data !== text) n.firstChild.data = text;
  say(n.lastChild, title);
}

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

// The empty picture, for paint().
export function picture() {
  const svg = node("svg", { class: "fanout live", role: "group", "aria-label": "live fan-out: clients, their connections and the brokers" });
  const parts = { edges: node("g", { class: "edges" }), pulses: node("g", { class: "pulses", "aria-hidden": "true" }),
    rows: node("g", { class: "rows" }), brokers: node("g", { class: "brokers" }) };
  svg.append(parts.edges, parts.pulses, parts.rows, parts.brokers);
  svg.fan = { parts, edges: new Map(), pulses: new Map(), rows: new Map(), brokers: new Map() };
  return svg;
}

// Brings `have` (id -> element, children of box) to `items`: update() each kept or made
// element, in the items' order when `ordered` (the rows' and brokers' Tab order), and
// leave() the ones no longer there.
function sync(box, have, items, { id, make, update, leave, ordered }) {
  const seen = new Set();
  let prev = null;
  for (const it of items) {
    const k = id(it);
    seen.add(k);
    let n = have.get(k);
    if (!n) {
      n = make(it);
      have.set(k, n);
    }
    update(n, it);
    if (ordered) {
      const at = prev ? prev.nextSibling : box.firstChild;
      if (n !== at) box.insertBefore(n, at);
      prev = n;
    } else if (!n.parentNode) {
      box.append(n);
    }
  }
  for (const [k, n] of have) {
    if (seen.has(k)) continue;
    have.delete(k);
    leave(n);
  }
}

function fadeOut(n, cls, still) {
  if (still) { n.remove(); return; }
  n.classList.replace(cls, `${cls}-gone`);
  n.classList.add("gone");
  n.setAttribute("aria-hidden", "true");
  setTimeout(() => n.remove(), LEAVE_MS);
}

// state: {marks, deltas (connection key -> requests since the last look), still, focus
// (a broker id whose edges stand out, or null), period (ms between looks)}
export function paint(svg, lay, state) {
  const { marks, deltas, still, focus, period } = state;
  const { parts } = svg.fan;
  const focused = focus !== null && focus !== undefined;
  set(svg, { class: `fanout live${focused ? " has-focus" : ""}`, width: lay.width, height: lay.height,
    viewBox: `0 0 ${lay.width} ${lay.height}`, "data-motion": still ? "off" : "on", "data-clients": lay.clients, "data-rows": lay.rows.length });

  const busy = [];
  sync(parts.edges, svg.fan.edges, lay.edges, {
    id: (e) => e.id,
    make: () => { const p = node("path"); p.append(node("title")); return p; },
    update: (p, e) => {
      const cls = ["edge", e.role, ...(e.agg ? ["agg"] : []), ...marksOf(e, marks)];
      const delta = e.conns.reduce((n, c) => n + (deltas.get(`${c.broker}:${c.connection_id}`) ?? 0), 0);
      if (delta > 0) cls.push("busy");
      if (focused && e.broker === focus) cls.push("hl");
      const single = e.conns.length === 1 && !e.agg ? e.conns[0] : null;
      set(p, { d: e.d, class: cls.join(" "), "data-role": e.role, "data-broker": e.broker,
        "data-row": e.row.key, "data-count": e.conns.length, "data-requests": delta,
        "data-conn": single ? single.connection_id : null, "data-partitions": single ? (single.partitions ?? []).join(" ") : null,
        "stroke-width": e.agg ? (1.5 + Math.log2(e.conns.length)).toFixed(1) : null });
      say(p.firstChild, edgeTitle(e));
      if (delta > 0 && !e.ghost) busy.push([delta, e]);
    },
    leave: (p) => fadeOut(p, "edge", still),
  });

  // the dots: up to 3 an edge, each keyed by its edge and its place among them; a kept
  // dot's motion goes on (its duration changes only when the rate changed by half)
  const dots = [];
  if (!still) {
    busy.sort((a, b) => b[0] - a[0]);
    let left = MAX_PULSES;
    for (const [delta, e] of busy) {
      const n = Math.min(3, Math.ceil(Math.log10(delta + 1) * 1.5), left);
      if (n <= 0) break;
      left -= n;
      const dur = Math.max(0.4, Math.min(period / 1000, 1.6 / Math.log2(delta + 2) * 2));
      for (let k = 0; k < n; k++) dots.push({ e, k, n, dur });
    }
  }
  sync(parts.pulses, svg.fan.pulses, dots, {
    id: (d) => `${d.e.id}#${d.k}`,
    make: () => { const c = node("circle", { r: 2.6 }); c.append(node("animateMotion", { repeatCount: "indefinite" })); return c; },
    update: (c, { e, k, n, dur }) => {
      set(c, { class: `pulse ${e.role}`, "data-broker": e.broker });
      const m = c.firstChild;
      set(m, { path: e.d });
      const was = Number(c.dataset.dur);
      if (!was || Number(c.dataset.n) !== n || Math.abs(Math.log(dur / was)) > Math.log(1.5)) {
        set(m, { dur: `${dur.toFixed(2)}s`, begin: `${(-k * dur / n).toFixed(2)}s` });
        Object.assign(c.dataset, { dur: dur.toFixed(2), n });
      }
    },
    leave: (c) => fadeOut(c, "pulse", still),
  });

  sync(parts.rows, svg.fan.rows, lay.rows, {
    id: (r) => r.key,
    ordered: true,
    make: () => {
      const g = node("g", { tabindex: 0, role: "button" });
      g.append(node("rect", { height: 20, rx: 4 }), labelled({ class: "label" }), node("text", { class: "count", "text-anchor": "end" }));
      return g;
    },
    update: (g, r) => {
      const open = r.kind === "head" || (r.kind === "more" && r.open);
      set(g, { class: `fan-row row-${r.kind}`, "data-key": r.key, "data-kind": r.kind,
        "aria-label": r.kind === "client" ? `${r.label}: ${r.conns.length} connections; Enter opens its detail`
          : `${r.title}; Enter ${open ? "folds" : "opens"} ${r.kind === "more" ? "them" : "the group"}`,
        "aria-expanded": r.kind === "client" ? null : String(open) });
      const x = r.indent ? 14 : 4;
      const [rect, label, count] = g.children;
      set(rect, { x, y: r.y - 10, width: lay.x1 - 6 - x });
      set(label, { x: x + 6, y: r.y + 4 });
      relabel(label, r.text, r.title);
      const shown = r.kind !== "head" && !(r.kind === "more" && r.open);
      set(count, { x: lay.x1 - 8, y: r.y + 4, display: shown ? null : "none" });
      say(count, shown ? String(r.conns.filter((c) => !c.ghost).length) : "");
    },
    leave: (g) => g.remove(),
  });

  const bx = lay.width - 190;
  sync(parts.brokers, svg.fan.brokers, lay.brokers, {
    id: (b) => b.id,
    ordered: true,
    make: () => {
      const g = node("g", { tabindex: 0, role: "button" });
      g.append(node("rect", { width: 180, height: 26, rx: 4 }), node("text"));
      return g;
    },
    update: (g, b) => {
      const st = b.broker ? brokerState(b.broker) : "down";
      const n = lay.edges.filter((e) => e.broker === b.id && !e.ghost).reduce((s, e) => s + e.conns.length, 0);
      const name = `broker ${b.id}${b.broker ? ` ${b.broker.host}:${b.broker.port}` : ""}`;
      set(g, { class: `fan-broker${focus === b.id ? " focused" : ""}`, "data-broker": b.id, "data-state": st,
        "aria-label": `${name}: ${st}, ${n} client connections; Enter picks out its edges`, "aria-pressed": String(focus === b.id) });
      const [rect, text] = g.children;
      set(rect, { x: bx, y: b.y - 13, class: `broker${st === "up" ? "" : ` ${st === "down" ? "down" : "isolated"}`}` });
      set(text, { x: bx + 8, y: b.y + 4 });
      say(text, `${name}${st === "up" ? "" : ` (${st})`} · ${n}`);
    },
    leave: (g) => g.remove(),
  });
  return svg;
}
