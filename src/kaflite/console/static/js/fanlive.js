// The live fan-out (#fanout): every client of the cluster on the left, every broker on the
// right, one edge per open connection coloured by role (seed 003's picture, from the
// registry). Each look (GET /api/fanout, once a second) is compared with the last: requests
// since then travel along their edges, new errors flash, new connections glow, closed ones
// stay a few seconds dashed, a partition whose connection moved to another broker (a leader
// moved, a broker died) marks its new edge re-routed, and a broker down is drawn down.
// The lines under the picture say the same in words. Keyboard: Tab to a client, Enter opens
// its detail (#connections/CLIENT@HOST); Enter (or a click) on a group or the "more" row
// opens it, again folds it back; on a broker, picks out its edges. The picture is one SVG
// kept across looks (fandraw.js: elements keyed by edge, row and broker, updated in place),
// so dots move on and nothing flickers.
import { ROUTES, api, clear, el, enc, poll } from "./core.js";
import { withFeature } from "./feature.js";
import { brokerState } from "./cluster.js";
import { paint, picture } from "./fandraw.js";
import { clientKey, connKey, layout } from "./fanlayout.js";
import { legend, mainRole, roleCounts } from "./roles.js";

const HOLD = { opened: 4000, error: 3000, rerouted: 8000 };   // ms a mark stays
const GHOST_MS = 5000;
const KEEP_LINES = 12;

const who = (c) => `${c.client_id ?? "(no client id)"}@${c.host}`;

export class LiveFan {
  constructor({ still = false, onOpen = () => {}, now = () => Date.now() } = {}) {
    Object.assign(this, { still, onOpen, now });
    this.view = { open: new Set(), shut: new Set(), all: false };
    this.focus = null;
    this.summary = el("div#fan-summary");
    this.key = el("div");
    this.box = el("div#fan-box");
    this.svg = picture();
    this.svg.addEventListener("click", (ev) => this.act(ev.target));
    this.svg.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" && ev.key !== " ") return;
      ev.preventDefault();
      this.act(ev.target);
    });
    this.lines = el("ol#fan-events", { "aria-live": "polite", "aria-label": "what changed" });
    this.root = el("div.livefan", null, this.summary, this.key, this.box, this.lines);
    this.reset();
  }

  reset() {
    this.prev = null;
    this.states = new Map();
    this.marks = new Map();      // connection key -> Map(class -> until)
    this.ghosts = new Map();     // connection key -> {conn, until}
    this.leaders = new Map();    // client key -> Map(partition -> broker)
    this.deltas = new Map();
  }

  mark(key, cls, t) {
    if (!this.marks.has(key)) this.marks.set(key, new Map());
    this.marks.get(key).set(cls, t + HOLD[cls]);
  }

  say(text, kind) {
    this.lines.prepend(el("li", { class: kind, "data-kind": kind, text: `${new Date().toISOString().slice(11, 19)} ${text}` }));
    while (this.lines.children.length > KEEP_LINES) this.lines.lastChild.remove();
  }

  // One look: {brokers, connections} as GET /api/fanout answers.
  update(data) {
    const t = this.now();
    const cur = new Map(data.connections.map((c) => [connKey(c), c]));
    this.deltas = new Map();
    if (this.prev) this.compare(this.prev, cur, t);
    this.reroutes(data.connections, t, this.prev !== null);
    for (const b of data.brokers) {
      const st = brokerState(b);
      const was = this.states.get(b.id);
      if (was !== undefined && was !== st) this.say(`broker ${b.id} ${st}`, st === "up" ? "broker-up" : "broker-down");
      this.states.set(b.id, st);
    }
    this.prev = cur;
    this.data = data;
    this.render();
  }

  compare(prev, cur, t) {
    for (const [k, c] of cur) {
      const p = prev.get(k);
      if (!p) {
        this.mark(k, "opened", t);
        this.say(`${who(c)} connected to broker ${c.broker} (${mainRole(c.roles)})`, "opened");
        continue;
      }
      this.deltas.set(k, Math.max(0, c.requests - p.requests));
      if (c.errors > p.errors) {
        this.mark(k, "error", t);
        this.say(`${who(c)}: ${c.errors - p.errors} error${c.errors - p.errors === 1 ? "" : "s"} from broker ${c.broker}`, "error");
      }
    }
    for (const [k, p] of prev) {
      if (cur.has(k)) continue;
      this.ghosts.set(k, { conn: { ...p, ghost: true }, until: t + GHOST_MS });
      this.say(`${who(p)}: connection to broker ${p.broker} (${mainRole(p.roles)}) closed`, "closed");
    }
  }

  // A partition (or a group's coordination) now served on a connection to another broker
  // than the last one seen for that client: a leader or coordinator moved, a broker died.
  reroutes(conns, t, tell) {
    const moved = new Map();   // "client|from|to" -> what moved
    for (const c of conns) {
      const ck = clientKey(c);
      if (!this.leaders.has(ck)) this.leaders.set(ck, new Map());
      const seen = this.leaders.get(ck);
      for (const what of [...(c.partitions ?? []), ...(c.groups ?? []).map((g) => `group ${g}`)]) {
        const was = seen.get(what);
        seen.set(what, c.broker);
        if (was === undefined || was === c.broker || !tell) continue;
        this.mark(connKey(c), "rerouted", t);
        const k = `${who(c)}|${was}|${c.broker}`;
        if (!moved.has(k)) moved.set(k, []);
        moved.get(k).push(what);
      }
    }
    for (const [k, items] of moved) {
      const [name, from, to] = k.split("|");
      this.say(`${name}: re-routed broker ${from} → broker ${to}: ${items.slice(0, 4).join(", ")}${items.length > 4 ? ` and ${items.length - 4} more` : ""}`, "rerouted");
    }
  }

  render() {
    if (!this.data) return;
    const t = this.now();
    for (const [k, m] of this.marks) {
      for (const [cls, until] of m) if (until <= t) m.delete(cls);
      if (!m.size) this.marks.delete(k);
    }
    for (const [k, g] of this.ghosts) if (g.until <= t || this.prev.has(k)) this.ghosts.delete(k);
    const marks = new Map([...this.marks].map(([k, m]) => [k, new Set(m.keys())]));
    const conns = [...this.data.connections, ...[...this.ghosts.values()].map((g) => g.conn)];
    const lay = layout(conns, this.data.brokers, this.view);
    const active = this.box.contains(document.activeElement) ? document.activeElement : null;
    const refocus = active?.dataset.key ? `[data-key="${CSS.escape(active.dataset.key)}"]`
      : active?.dataset.broker ? `.fan-broker[data-broker="${active.dataset.broker}"]` : null;
    paint(this.svg, lay, { marks, deltas: this.deltas, still: this.still, focus: this.focus, period: 1000 });
    if (this.svg.parentNode !== this.box) clear(this.box).append(this.svg);
    // the focused row or broker is the same element after an update; should it have moved
    // in the Tab order, focus it again
    const again = refocus && this.svg.querySelector(refocus);
    if (again && document.activeElement !== again) again.focus();
    this.lay = lay;
    const live = this.data.connections;
    const up = this.data.brokers.filter((b) => brokerState(b) === "up").length;
    const rate = [...this.deltas.values()].reduce((a, b) => a + b, 0);
    this.summary.textContent = `${lay.clients} clients · ${live.length} connections · ${up} of ${this.data.brokers.length} brokers up · ${rate} requests since the last look`;
    clear(this.key).append(legend(roleCounts(live)));
  }

  act(target) {
    const row = target.closest?.(".fan-row");
    const broker = target.closest?.(".fan-broker");
    if (row) {
      const r = this.lay.rows.find((x) => x.key === row.dataset.key);
      if (!r) return;
      if (r.kind === "client") this.onOpen(r);
      else if (r.kind === "more") this.view.all = !this.view.all;
      else if (r.kind === "head") { this.view.open.delete(r.group); this.view.shut.add(r.group); }
      else { this.view.shut.delete(r.group); this.view.open.add(r.group); }
      this.render();
    } else if (broker) {
      const id = Number(broker.dataset.broker);
      this.focus = this.focus === id ? null : id;
      this.render();
    }
  }
}

export function mount(root) {
  const still = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  const live = new LiveFan({ still, onOpen: (r) => { location.hash = `#connections/${enc(r.key)}`; } });
  const showMine = el("input#fan-show-console", { type: "checkbox" });
  showMine.addEventListener("change", () => live.reset());
  root.append(el("section.card", null, el("h2", { text: "Live fan-out" }),
    el("div.toolbar", null, el("label", null, showMine, " the console's own"),
      el("span.muted", { text: still ? "reduced motion: requests shown as counts, no animation" : "dots: requests since the last look" })),
    live.root));
  let loadMs = 0;
  return withFeature(root, { feature: "connections", id: "no-connections", title: "Live fan-out",
    message: "The fan-out comes from the brokers' connection registry: it shows on a kaflite cluster (kaflite up), not through the Kafka protocol." },
  () => poll(async () => {
    const t0 = performance.now();
    live.update(await api("GET", ROUTES.fanout + (showMine.checked ? "?console=1" : "")));
    loadMs = performance.now() - t0;
    root.dataset.ready = "1";
  }, () => Math.max(1000, 20 * loadMs)));
}
