// The chaos page's recovery feed: the cluster's live changes, told once and grouped.
//
// A broker line says when a broker went down, came back or was isolated; its second event
// for the same state (the process stopped, then the controller fenced it) adds to that line
// instead of repeating it. Between two broker lines, each topic's leader and ISR changes
// fold into one line (an internal topic's always closed, a user topic's open while short),
// whose details list every change. A text filter, a kind filter and an internal-topic
// switch choose what shows. Newest first.
import { clear, el } from "./core.js";

const MAX_ENTRIES = 500;      // lines kept in the feed
const MAX_DETAILS = 400;      // changes listed under one topic line (all are counted)
const OPEN_UP_TO = 8;         // a user topic's line shows its changes while this few

export const isInternal = (topic) => topic.startsWith("__");
const clock = (t) => new Date(t * 1000).toISOString().slice(11, 23);
const secs = (dt) => `${dt.toFixed(1)} s`;

export function brokerEventState(ev) {
  if (ev.running === false || ev.alive === false) return "down";
  return ev.isolated ? "isolated" : "up";
}

function changeText(ev) {
  if (ev.change === "leader") {
    const to = ev.leader < 0 ? "none" : ev.leader;
    return `partition ${ev.partition}: leader ${ev.previous ?? "none"} → ${to} (epoch ${ev.leader_epoch})`;
  }
  return `partition ${ev.partition}: ISR ${ev.isr.join(",") || "empty"}`;
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// The grouping, apart from the DOM: add(ev) returns the entry it made or changed, or null.
export class RecoveryLog {
  constructor() {
    this.entries = [];
    this.brokers = new Map();     // broker id -> its last broker entry
    this.topics = new Map();      // topic -> its entry since the last broker line
  }

  add(ev) {
    const t = ev.t ?? Date.now() / 1000;
    if (ev.change === "broker") return this.broker(ev, t);
    if (ev.change === "topic") {
      this.topics.delete(ev.topic);
      return this.push({ kind: "topic", t, topic: ev.topic, internal: isInternal(ev.topic),
        created: !!ev.created });
    }
    if (ev.change !== "leader" && ev.change !== "isr") return null;
    let entry = this.topics.get(ev.topic);
    if (!entry) {
      entry = { kind: "partitions", t, last: t, topic: ev.topic, internal: isInternal(ev.topic),
        leader: 0, isr: 0, noLeader: new Set(), partitions: new Set(), leaders: new Map(),
        changes: [] };
      this.topics.set(ev.topic, entry);
      this.push(entry);
    }
    entry.last = t;
    entry[ev.change] += 1;
    entry.partitions.add(ev.partition);
    if (ev.change === "leader") {
      entry.leaders.set(ev.partition, ev.leader);
      if (ev.leader < 0) entry.noLeader.add(ev.partition);
      else entry.noLeader.delete(ev.partition);
    }
    entry.changes.push(ev);
    if (entry.changes.length > MAX_DETAILS) entry.changes.shift();
    return entry;
  }

  broker(ev, t) {
    const state = brokerEventState(ev);
    const last = this.brokers.get(ev.broker);
    if (last && last.state === state) {      // the same state again: said on its line
      last.notes.push({ t, ev });
      return last;
    }
    const entry = { kind: "broker", t, broker: ev.broker, state, notes: [], ev };
    this.brokers.set(ev.broker, entry);
    this.topics.clear();                      // what follows is this change's recovery
    return this.push(entry);
  }

  push(entry) {
    this.entries.push(entry);
    if (this.entries.length > MAX_ENTRIES) {
      const gone = this.entries.shift();
      if (gone.kind === "partitions" && this.topics.get(gone.topic) === gone) this.topics.delete(gone.topic);
      if (gone.kind === "broker" && this.brokers.get(gone.broker) === gone) this.brokers.delete(gone.broker);
    }
    return entry;
  }
}

// Why a broker's event says what it says (kaflite tells process and registration apart).
function brokerCause(ev) {
  if (ev.alive === false && ev.running === null) return "gone from the metadata";
  if (ev.running === false) return "its process stopped";
  if (ev.alive === false) return ev.running === true ? "its process runs, not registered yet" : "fenced by the controller";
  return "";
}

export function entryText(entry) {
  if (entry.kind === "broker") {
    const cause = entry.state === "down" ? brokerCause(entry.ev) : "";
    const notes = entry.notes.map((n) => {
      const what = n.ev.running === false && n.ev.alive === false && entry.ev.running === false
        ? "fenced by the controller" : brokerCause(n.ev) || entry.state;
      return `then ${what} (+${secs(n.t - entry.t)})`;
    });
    return [`broker ${entry.broker}: ${entry.state}${cause ? ` (${cause})` : ""}`, ...notes].join(", ");
  }
  if (entry.kind === "topic") return `topic ${entry.topic} ${entry.created ? "created" : "deleted"}`;
  const parts = [];
  if (entry.leader) parts.push(plural(entry.leader, "leader change"));
  if (entry.isr) parts.push(plural(entry.isr, "ISR change"));
  let text = `${entry.topic}${entry.internal ? " (internal)" : ""}: ${parts.join(", ")} on ${plural(entry.partitions.size, "partition")}`;
  if (entry.noLeader.size) text += ` · ${plural(entry.noLeader.size, "partition")} without a leader`;
  else if (!entry.internal && entry.leaders.size) {
    const moved = [...entry.leaders].sort((a, b) => a[0] - b[0]).slice(0, 6).map(([p, l]) => `${p}→${l}`);
    text += ` · leaders now ${moved.join(" ")}${entry.leaders.size > 6 ? " …" : ""}`;
  }
  if (entry.last > entry.t) text += ` · over ${secs(entry.last - entry.t)}`;
  return text;
}

// The kinds of change an entry holds, for the kind filter.
function entryKinds(entry) {
  if (entry.kind === "broker") return ["broker"];
  if (entry.kind === "topic") return ["topic"];
  return [entry.leader ? "leader" : null, entry.isr ? "isr" : null].filter(Boolean);
}

// The feed on the page: an <ol id="recovery"> and its toolbar. Events are drawn once a
// frame, however many arrive (a broker of 20,000 partitions moves many leaders at once).
export function recoveryFeed() {
  const log = new RecoveryLog();
  const list = el("ol#recovery");
  const nodes = new Map();          // entry -> its <li>
  const dirty = new Set();
  let frame = 0;
  const text = el("input#recovery-filter", { type: "search", placeholder: "filter topics…",
    "aria-label": "filter the recovery feed by topic" });
  const kind = el("select#recovery-kind", { "aria-label": "kind of change" },
    ...[["", "every change"], ["broker", "brokers"], ["leader", "leaders"], ["isr", "ISR"], ["topic", "topics"]]
      .map(([v, label]) => el("option", { value: v, text: label })));
  const internal = el("input#recovery-internal", { type: "checkbox", checked: true });
  const count = el("span.muted#recovery-count");
  text.addEventListener("input", () => refilter());
  kind.addEventListener("change", () => refilter());
  internal.addEventListener("change", () => refilter());
  const toolbar = el("div.toolbar", null, text, kind, el("label", null, internal, " internal topics"), count);

  // Broker lines stay under a text filter: they are the timeline the topic lines hang on.
  function visible(entry) {
    if (entry.internal && !internal.checked) return false;
    if (kind.value && !entryKinds(entry).includes(kind.value)) return false;
    const f = text.value.trim().toLowerCase();
    return !f || entry.kind === "broker" || entry.topic.toLowerCase().includes(f);
  }

  function details(entry, box) {
    clear(box);
    const dropped = entry.leader + entry.isr - entry.changes.length;
    if (dropped > 0) box.append(el("li.muted", { text: `… ${dropped} earlier changes` }));
    for (const ev of entry.changes) box.append(el("li", { "data-change": ev.change, text: `${clock(ev.t ?? entry.t)} ${changeText(ev)}` }));
  }

  // A user topic's line opens while it has few changes, until the user opens or closes it.
  function wantOpen(entry) {
    return !entry.internal && entry.leader + entry.isr <= OPEN_UP_TO;
  }

  function draw(entry) {
    let li = nodes.get(entry);
    if (!li) {
      const attrs = { "data-change": entry.kind, "data-topic": entry.topic, "data-broker": entry.broker,
        "data-state": entry.state, "data-internal": entry.internal ? "1" : undefined };
      if (entry.kind === "partitions") {
        const summary = el("summary");
        const box = el("ul.changes");
        const det = el("details", null, summary, box);
        li = el(`li.${entry.internal ? "internal" : "user"}`, attrs, det);
        Object.assign(li, { _summary: summary, _details: det, _box: box, _want: false, _user: false });
        det.addEventListener("toggle", () => {
          if (det.open !== li._want) li._user = true;
          if (det.open) details(entry, box);
        });
      } else {
        li = el(`li.${entry.kind}`, attrs);
      }
      nodes.set(entry, li);
      list.prepend(li);
    }
    const line = `${clock(entry.t)} ${entryText(entry)}`;
    if (entry.kind === "partitions") {
      li._summary.textContent = line;
      li.dataset.changes = String(entry.leader + entry.isr);
      if (!li._user && li._details.open !== wantOpen(entry)) {
        li._want = wantOpen(entry);
        li._details.open = li._want;
      } else if (li._details.open) {
        details(entry, li._box);
      }
    } else if (li.textContent !== line) {
      li.textContent = line;
    }
    li.hidden = !visible(entry);
  }

  function countShown() {
    let shown = 0;
    for (const li of nodes.values()) if (!li.hidden) shown += 1;
    count.textContent = shown === nodes.size ? plural(shown, "line") : `${shown} of ${plural(nodes.size, "line")}`;
  }

  function refilter() {
    for (const [entry, li] of nodes) li.hidden = !visible(entry);
    countShown();
  }

  function flush() {
    frame = 0;
    const kept = new Set(log.entries);
    for (const [entry, li] of nodes) {
      if (!kept.has(entry)) {
        li.remove();
        nodes.delete(entry);
      }
    }
    for (const entry of dirty) if (kept.has(entry)) draw(entry);
    dirty.clear();
    countShown();
  }

  return {
    log,
    root: el("div#recovery-feed", null, toolbar, list),
    add(ev) {
      const entry = log.add(ev);
      if (!entry) return;
      dirty.add(entry);
      if (!frame) frame = requestAnimationFrame(flush);
    },
    stop() {
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
    },
  };
}
