// Connections: the registry's client connections grouped by client, the fan-out picture of
// one client (bootstrap, partition-leader and coordinator connections, each to its broker),
// measured cadences and principals.
import { ROUTES, api, clear, el, fmtBytes, fmtNum, poll } from "./core.js";
import { withFeature } from "./feature.js";
import { brokerState } from "./cluster.js";
import { VTable, filterBox } from "./vtable.js";
import { legend, mainRole, roleCounts } from "./roles.js";

const SVG = "http://www.w3.org/2000/svg";
const ms = (v) => (v === null || v === undefined ? "" : `${Number(v).toFixed(0)} ms`);

const CLIENT_COLUMNS = [
  { key: "client", label: "client id", grow: 2, max: 20, text: (c) => c.client_id ?? "(none)" },
  { key: "host", label: "host", text: (c) => c.host },
  { key: "software", label: "software", grow: 1, max: 14, text: (c) => [c.software_name, c.software_version].filter(Boolean).join(" ") },
  { key: "principal", label: "principal", text: (c) => c.principal },
  { key: "conns", label: "connections", text: (c) => c.connections, sort: (c) => c.connections },
  { key: "fanout", label: "brokers", grow: 1, text: (c) => Object.entries(c.fan_out).map(([b, n]) => `${b}×${n}`).join(" ") },
  { key: "roles", label: "roles", grow: 2, max: 32, text: (c) => Object.entries(c.roles).map(([r, n]) => `${r}×${n}`).join(" ") },
  { key: "hb", label: "heartbeat", text: (c) => ms(c.heartbeat_interval_ms) },
  { key: "commit", label: "commit", text: (c) => ms(c.commit_interval_ms) },
  { key: "fetch", label: "fetch/s", text: (c) => (c.fetch_rate === null || c.fetch_rate === undefined ? "" : Number(c.fetch_rate).toFixed(1)) },
];

const CONN_COLUMNS = [
  { key: "id", label: "id", text: (c) => c.connection_id, sort: (c) => c.connection_id },
  { key: "broker", label: "broker", text: (c) => c.broker, sort: (c) => c.broker },
  { key: "peer", label: "peer", text: (c) => c.peer },
  { key: "client", label: "client id", grow: 2, max: 18, text: (c) => c.client_id ?? "" },
  { key: "principal", label: "principal", text: (c) => c.principal },
  { key: "roles", label: "roles", grow: 1, max: 28, text: (c) => c.roles.join(", ") },
  { key: "parts", label: "partitions", grow: 1, max: 14, text: (c) => c.partitions.join(" ") },
  { key: "groups", label: "groups", max: 12, text: (c) => c.groups.join(" ") },
  { key: "in", label: "bytes in", text: (c) => fmtBytes(c.bytes_in), sort: (c) => c.bytes_in },
  { key: "out", label: "bytes out", text: (c) => fmtBytes(c.bytes_out), sort: (c) => c.bytes_out },
  { key: "reqs", label: "requests", text: (c) => fmtNum(Object.values(c.apis || {}).reduce((n, a) => n + a.count, 0)) },
  { key: "telemetry", label: "telemetry (KIP-714)", grow: 2, max: 16, text: telemetryText, sort: (c) => Object.keys(c.telemetry || {}).length },
];

// A connection's pushed client metrics: how many, how many pushes, the first two values;
// the whole set (name -> latest value) is in the row's JSON (GET /api/connections).
export function telemetryText(c) {
  if (!c.client_instance_id) return "";
  const metrics = Object.entries(c.telemetry || {});
  if (!c.telemetry_pushes) return `instance ${c.client_instance_id.slice(0, 8)}…`;
  const head = metrics.slice(0, 2).map(([k, v]) => `${k.replace(/^org\.apache\.kafka\./, "")}=${Number(v).toPrecision(4)}`);
  return [`${metrics.length} metrics ×${c.telemetry_pushes}`, ...head].join(" · ");
}

const clientKey = (c) => `${c.client_id ?? ""}\u0000${c.host}`;

// #connections/CLIENT_ID@HOST opens with that client's fan-out (the live view's Enter).
export function mount(root, arg) {
  let selected = arg && arg.includes("@") ? `${arg.slice(0, arg.lastIndexOf("@"))}\u0000${arg.slice(arg.lastIndexOf("@") + 1)}` : null;
  let brokers = [];
  const clients = new VTable(CLIENT_COLUMNS, { key: clientKey, name: "clients", height: "30vh",
    onClick: (c) => { selected = clientKey(c); clients.schedule(); refresh(); } });
  clients.rowClass = (x) => (clientKey(x) === selected ? "selected" : "");
  const conns = new VTable(CONN_COLUMNS, { key: (c) => c.connection_id, name: "connections", height: "40vh" });
  const fanBox = el("div#fanout", null, el("div.muted", { text: "click a client for its fan-out" }));
  // The console's own clients (kaflite-console*) only read for this page: hidden unless asked.
  const showMine = el("input#show-console", { type: "checkbox" });
  showMine.addEventListener("change", () => refresh());
  root.append(
    el("section.card", null, el("h2", { text: "Clients" }),
      el("div.toolbar", null, filterBox(clients, "filter clients…"), clients.count,
        el("label", null, showMine, " the console's own")), clients.root),
    el("section.card", null, el("h2", { text: "Fan-out" }), fanBox),
    el("section.card", null, el("h2", { text: "Connections" }),
      el("div.toolbar", null, filterBox(conns, "filter connections…"), conns.count), conns.root));

  // Every 2 s, or 20 times the last load's duration when longer (1,000s of connections).
  let loadMs = 0;
  async function refresh() {
    const t0 = performance.now();
    const mine = showMine.checked ? "?console=1" : "";
    const [cl, cs, cluster] = await Promise.all([api("GET", ROUTES.clients + mine), api("GET", ROUTES.connections + mine), api("GET", ROUTES.cluster)]);
    brokers = cluster.brokers;
    clients.setRows(cl);
    conns.setRows(cs);
    const client = cl.find((c) => clientKey(c) === selected);
    if (client) {
      const mine = cs.filter((c) => (c.client_id ?? "") === (client.client_id ?? "") && c.peer.startsWith(`${client.host}:`));
      clear(fanBox).append(fanout(client, mine, brokers));
    }
    loadMs = performance.now() - t0;
    root.dataset.ready = "1";
  }
  return withFeature(root, { feature: "connections", id: "no-connections", title: "Connections",
    message: "Connections come from the brokers' connection registry: they show on a kaflite cluster (kaflite up), not through the Kafka protocol." },
  () => poll(refresh, () => Math.max(2000, 20 * loadMs)));
}

// The picture: the client on the left, every broker on the right, one line per connection.
export function fanout(client, conns, brokers) {
  const byBroker = new Map(brokers.map((b) => [b.id, []]));
  for (const c of conns) {
    if (!byBroker.has(c.broker)) byBroker.set(c.broker, []);
    byBroker.get(c.broker).push(c);
  }
  const ids = [...byBroker.keys()].sort((a, b) => a - b);
  const rowH = 34;
  const height = Math.max(120, ids.length * rowH + 20);
  const width = 760;
  const svg = document.createElementNS(SVG, "svg");
  const counts = roleCounts(conns);
  const roleCount = { leader: 0, coordinator: 0 };
  for (const c of conns) {
    if (c.roles.some((r) => r.includes("leader"))) roleCount.leader += 1;
    if (c.roles.some((r) => r.includes("coordinator"))) roleCount.coordinator += 1;
  }
  const attrs = { class: "fanout", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "data-connections": conns.length, "data-leader-connections": roleCount.leader,
    "data-coordinator-connections": roleCount.coordinator, "data-bootstrap-connections": counts.bootstrap };
  for (const [k, v] of Object.entries(attrs)) svg.setAttribute(k, String(v));
  const add = (tag, a, text) => {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(a)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  const cx = 20;
  const cy = height / 2 - 25;
  const bx = width - 190;
  ids.forEach((id, i) => {
    const y = 10 + i * rowH;
    const list = byBroker.get(id);
    list.forEach((c, j) => {
      const role = mainRole(c.roles);
      const yy = y + 14 + (j - (list.length - 1) / 2) * 7;
      const line = add("line", { x1: cx + 170, y1: cy + 25, x2: bx, y2: yy, class: role, "data-role": role, "data-broker": id });
      const t = document.createElementNS(SVG, "title");
      t.textContent = `connection ${c.connection_id} → broker ${id}: ${c.roles.join(", ") || "no role yet"}${c.partitions.length ? ` (${c.partitions.join(" ")})` : ""}${c.groups.length ? ` groups ${c.groups.join(" ")}` : ""}`;
      line.append(t);
    });
    const b = brokers.find((x) => x.id === id);
    const down = b && brokerState(b) !== "up";
    add("rect", { x: bx, y, width: 170, height: 28, rx: 4, class: `broker${down ? " down" : ""}`, "data-broker": id });
    add("text", { x: bx + 8, y: y + 18 }, `broker ${id}${b ? ` ${b.host}:${b.port}` : ""}${down ? " (down)" : ""} · ${list.length}`);
  });
  add("rect", { x: cx, y: cy, width: 170, height: 50, rx: 6, class: "client" });
  add("text", { x: cx + 8, y: cy + 20 }, (client.client_id ?? "(no client id)").slice(0, 26));
  add("text", { x: cx + 8, y: cy + 38 }, `${client.host} · ${conns.length} connections`);
  const summary = el("div#fanout-summary", { text:
    `${client.client_id ?? "(no client id)"}: ${roleCount.leader} partition-leader connection${roleCount.leader === 1 ? "" : "s"}, ${roleCount.coordinator} coordinator connection${roleCount.coordinator === 1 ? "" : "s"}, ${counts.bootstrap} bootstrap-only; ` +
    `heartbeat ${ms(client.heartbeat_interval_ms) || "–"}, commit ${ms(client.commit_interval_ms) || "–"}, fetch ${client.fetch_rate ? Number(client.fetch_rate).toFixed(1) : "–"}/s; principal ${client.principal}` });
  return el("div", null, summary, legend(counts), svg);
}
