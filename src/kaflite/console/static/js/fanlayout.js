// The live fan-out's layout (no DOM): clients in rows on the left, brokers on the right,
// one edge per connection. Clients whose client.id differs only by a trailing number form a
// group; with more than AUTO_FOLD clients a group of several is folded into one row whose
// edges are aggregated per (broker, role), and past MAX_ROWS rows the rest fold into one
// "more" row, so 50 clients on 12 brokers stay a picture of bounded height.
import { ROLES, mainRole } from "./roles.js";

export const WIDTH = 900;
export const CLIENT_W = 250;
export const BROKER_W = 190;
export const ROW_H = 24;
export const MAX_ROWS = 24;
export const AUTO_FOLD = 12;
const TOP = 8;
const BROKER_SLOT = 34;

export const clientKey = (c) => `${c.client_id ?? ""}@${c.host}`;
export const connKey = (c) => `${c.broker}:${c.connection_id}`;
// A client's group: its client.id without a trailing number (orders-consumer-7 → orders-consumer).
export const family = (id) => (id ?? "(no client id)").replace(/[-_.#]?\d+$/, "") || id;

const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const lane = (role) => ROLES.findIndex(([r]) => r === role) - (ROLES.length - 1) / 2;

// The rows: a client, a folded group, an open group's heading, or the "more" row.
function rowsOf(conns, view) {
  const clients = new Map();
  for (const c of conns) {
    const k = clientKey(c);
    if (!clients.has(k)) clients.set(k, { key: k, client_id: c.client_id, host: c.host, conns: [] });
    clients.get(k).conns.push(c);
  }
  const groups = new Map();
  for (const cl of clients.values()) {
    const g = family(cl.client_id);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(cl);
  }
  const fold = clients.size > AUTO_FOLD;
  let rows = [];
  for (const name of [...groups.keys()].sort()) {
    const members = groups.get(name).sort((a, b) => (a.key < b.key ? -1 : 1));
    const single = (cl) => ({ kind: "client", key: cl.key, group: name, label: `${cl.client_id ?? "(no client id)"} @ ${cl.host}`, clients: [cl] });
    if (members.length === 1) {
      rows.push(single(members[0]));
    } else if (view.open.has(name) || (!fold && !view.shut.has(name))) {
      rows.push({ kind: "head", key: `group:${name}`, group: name, label: `▾ ${name} ×${members.length}`, clients: [] });
      rows.push(...members.map((cl) => ({ ...single(cl), indent: true })));
    } else {
      rows.push({ kind: "group", key: `group:${name}`, group: name, label: `▸ ${name} ×${members.length}`, clients: members });
    }
  }
  if (rows.length > MAX_ROWS) {
    // past MAX_ROWS the rest fold into one "more" row; opened (view.all), the same row
    // stays in its place as the heading of the rest, and folds them back
    const rest = rows.slice(MAX_ROWS - 1);
    const them = rest.flatMap((r) => r.clients);
    const more = { kind: "more", key: "more", group: null, open: view.all, label: `${view.all ? "▾" : "▸"} ${them.length} more clients`, clients: view.all ? [] : them };
    if (view.all) more.title = `${more.label}: the rows below`;
    rows = [...rows.slice(0, MAX_ROWS - 1), more, ...(view.all ? rest : [])];
  }
  for (const r of rows) {
    r.conns = r.clients.flatMap((cl) => cl.conns);
    r.title ??= r.kind === "client" ? r.label : `${r.label}: ${r.clients.map((cl) => cl.key).join(", ")}`;
    r.text = clip(r.label, r.indent ? 36 : 38);
  }
  return { rows, clients: clients.size };
}

// layout(conns, brokers, view): view is {open: Set, shut: Set, all: bool} (groups the user
// opened or folded, and whether the "more" row was opened: the rows past it then follow it).
// Connections with .ghost (just closed) are edges of their own, never aggregated with open
// ones. Each edge's id names its element in the picture (fandraw.js), kept across looks.
export function layout(conns, brokers, view = {}) {
  const v = { open: view.open ?? new Set(), shut: view.shut ?? new Set(), all: !!view.all };
  const { rows, clients } = rowsOf(conns, v);
  const ids = [...new Set([...brokers.map((b) => b.id), ...conns.map((c) => c.broker)])].sort((a, b) => a - b);
  const byId = new Map(brokers.map((b) => [b.id, b]));
  const height = 2 * TOP + Math.max(rows.length * ROW_H, ids.length * BROKER_SLOT, 60);
  const slot = (height - 2 * TOP) / Math.max(ids.length, 1);
  const brokerRows = ids.map((id, i) => ({ id, broker: byId.get(id), y: TOP + slot * (i + 0.5) }));
  const brokerY = new Map(brokerRows.map((b) => [b.id, b.y]));
  rows.forEach((r, i) => { r.y = TOP + ROW_H * (i + 0.5); });
  const edges = [];
  const x1 = CLIENT_W + 6;
  const x2 = WIDTH - BROKER_W - 6;
  for (const r of rows) {
    const buckets = new Map();
    for (const c of r.conns) {
      const role = mainRole(c.roles);
      const key = r.kind === "client" ? connKey(c) : `${r.key}|${c.broker}|${role}`;
      const k = c.ghost ? `${key}|closed` : key;
      // id: the edge's element in the picture; a client's connection keeps its own when it
      // closes (drawn closed), an aggregated edge's closed connections are one of their own
      const id = r.kind === "client" ? key : k;
      if (!buckets.has(k)) buckets.set(k, { key: k, id, row: r, role, broker: c.broker, ghost: !!c.ghost, conns: [] });
      buckets.get(k).conns.push(c);
    }
    const perBroker = new Map();
    for (const e of buckets.values()) {
      const j = perBroker.get(e.broker) ?? 0;
      perBroker.set(e.broker, j + 1);
      const off = lane(e.role) * 2 + (j % 3) * 0.8;
      const ya = r.y + off * 0.6;
      const yb = brokerY.get(e.broker) + off;
      const xm = (x1 + x2) / 2;
      e.agg = r.kind !== "client";
      e.d = `M${x1},${ya.toFixed(1)} C${xm},${ya.toFixed(1)} ${xm},${yb.toFixed(1)} ${x2},${yb.toFixed(1)}`;
      edges.push(e);
    }
  }
  return { rows, brokers: brokerRows, edges, clients, width: WIDTH, height, x1, x2 };
}
