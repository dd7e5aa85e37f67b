// Cluster: brokers (up, down, isolated), the controller, every partition (leader, replicas,
// ISR, offsets, size) and a topic's configs, live.
import { ROUTES, api, el, clear, fmtBytes, fmtNum, notify, poll, stream } from "./core.js";
import { loadTopics } from "./data.js";
import { VTable, filterBox } from "./vtable.js";

export function brokerState(b) {
  if (b.running === false || b.alive === false) return "down";
  if (b.isolated) return "isolated";
  return "up";
}

// One row per partition, flattened from the cluster view.
export function partitionRows(cluster) {
  const rows = [];
  for (const t of cluster.topics || []) {
    for (const p of t.partitions || []) {
      rows.push({ topic: t.name, internal: !!t.internal, ...p });
    }
  }
  return rows;
}

const pick = (p, ...names) => {
  for (const n of names) if (p[n] !== undefined && p[n] !== null) return p[n];
  return null;
};

export const PARTITION_COLUMNS = [
  { key: "topic", label: "topic", grow: 2, text: (p) => p.topic },
  { key: "partition", label: "partition", text: (p) => p.partition, sort: (p) => p.partition },
  { key: "leader", label: "leader", text: (p) => (p.leader === null || p.leader < 0 ? "none" : p.leader),
    cls: (p) => (p.leader === null || p.leader < 0 ? "no-leader" : "") },
  { key: "epoch", label: "epoch", text: (p) => pick(p, "leader_epoch") ?? "" },
  { key: "replicas", label: "replicas", grow: 1, text: (p) => (p.replicas || []).join(",") },
  { key: "isr", label: "ISR", grow: 1, text: (p) => (p.isr || []).join(","),
    cls: (p) => ((p.isr || []).length < (p.replicas || []).length ? "under-replicated" : "") },
  { key: "start", label: "log start", text: (p) => fmtNum(pick(p, "log_start_offset")), sort: (p) => pick(p, "log_start_offset") ?? -1 },
  { key: "end", label: "log end", text: (p) => fmtNum(pick(p, "log_end_offset")), sort: (p) => pick(p, "log_end_offset") ?? -1 },
  { key: "hw", label: "HW", text: (p) => fmtNum(pick(p, "high_watermark")), sort: (p) => pick(p, "high_watermark") ?? -1 },
  { key: "lso", label: "LSO", text: (p) => fmtNum(pick(p, "last_stable_offset")), sort: (p) => pick(p, "last_stable_offset") ?? -1 },
  { key: "size", label: "size", text: (p) => fmtBytes(pick(p, "size_bytes", "size")), sort: (p) => pick(p, "size_bytes", "size") ?? -1 },
];

export function brokerTable(cluster) {
  const controller = cluster.controller ?? cluster.controller_id;
  const tbody = el("tbody");
  for (const b of cluster.brokers || []) {
    const state = brokerState(b);
    tbody.append(el("tr", { "data-broker": b.id, "data-state": state },
      el("td", { text: b.id }),
      el("td", { text: `${b.host}:${b.port}` }),
      el("td", { text: b.rack ?? "" }),
      el(`td.state-${state}`, { text: state }),
      el("td", { text: b.id === controller ? "controller" : "" }),
      el("td", { text: b.leaders ?? countLeaders(cluster, b.id) })));
  }
  return el("table.plain.brokers", null,
    el("thead", null, el("tr", null, ...["broker", "address", "rack", "state", "role", "leaders"].map((h) => el("th", { text: h })))),
    tbody);
}

function countLeaders(cluster, id) {
  let n = 0;
  for (const t of cluster.topics || []) for (const p of t.partitions || []) if (p.leader === id) n += 1;
  return n;
}

export function mount(root) {
  const summary = el("div.muted");
  const brokersBox = el("div");
  const table = new VTable(PARTITION_COLUMNS, { key: (p) => `${p.topic}-${p.partition}`, name: "partitions",
    onClick: (p) => showConfigs(p.topic) });
  const showInternal = el("input", { type: "checkbox" });
  const configsBox = el("div.muted", { text: "click a partition for its topic's configs" });
  const state = { cluster: null, topics: [], byKey: new Map() };
  showInternal.addEventListener("change", () => renderPartitions());
  root.append(
    el("section.card", null, el("h2", { text: "Brokers" }), summary, brokersBox),
    el("section.card", null, el("h2", { text: "Partitions" }),
      el("div.toolbar", null, filterBox(table, "filter by topic, leader, ISR…"),
        el("label", null, showInternal, " internal topics"), table.count,
        el("span.muted", { text: "click a row for its topic's configs" })),
      table.root),
    el("section.card#topic-configs", null, el("h2", { text: "Topic configs" }), configsBox));

  function renderBrokers() {
    const c = state.cluster;
    if (!c) return;
    const up = c.brokers.filter((b) => brokerState(b) === "up").length;
    summary.textContent = `cluster ${c.cluster_id ?? ""} · ${up}/${c.brokers.length} brokers up · controller ${c.controller ?? "?"} · ${c.topics} topics · ${c.partitions} partitions · ${c.under_replicated ?? 0} under-replicated · ${c.offline ?? 0} offline`;
    clear(brokersBox).append(brokerTable({ ...c, topics: state.topics }));
  }

  function renderPartitions() {
    const rows = [];
    state.byKey.clear();
    for (const t of state.topics) {
      if (t.internal && !showInternal.checked) continue;
      for (const p of t.partitions || []) {
        const row = { topic: t.name, internal: !!t.internal, ...p };
        rows.push(row);
        state.byKey.set(`${t.name}-${p.partition}`, row);
      }
    }
    table.setRows(rows);
    renderBrokers();
    root.dataset.ready = "1";
  }

  // Offsets and sizes refresh every 5 s, or less often when a load takes long (a big
  // cluster): the page never keeps the cluster's loop busy more than 1/20 of the time.
  let loadMs = 0;
  async function refreshPartitions() {
    const t0 = performance.now();
    state.topics = await loadTopics(true);
    loadMs = performance.now() - t0;
    renderPartitions();
  }

  // A live change patches the row in place; the next refresh brings the offsets.
  function onChange(ev) {
    if (ev.change === "broker" && state.cluster) {
      const b = state.cluster.brokers.find((x) => x.id === ev.broker);
      if (b) Object.assign(b, { alive: ev.alive, isolated: ev.isolated, running: ev.running });
      renderBrokers();
    } else if (ev.change === "leader" || ev.change === "isr") {
      const row = state.byKey.get(`${ev.topic}-${ev.partition}`);
      const topic = state.topics.find((t) => t.name === ev.topic);
      const part = topic && topic.partitions.find((p) => p.partition === ev.partition);
      for (const target of [row, part]) {
        if (!target) continue;
        if (ev.change === "leader") Object.assign(target, { leader: ev.leader, leader_epoch: ev.leader_epoch });
        else target.isr = ev.isr;
      }
      table.schedule();
      if (ev.change === "leader") renderBrokers();
    } else if (ev.change === "topic") {
      refreshPartitions().catch(() => {});
    }
  }

  async function showConfigs(topic) {
    clear(configsBox).append(el("div.muted", { text: `loading ${topic}…` }));
    try {
      const data = await api("GET", ROUTES.topic(topic));
      clear(configsBox).append(el("h3", { text: topic }), configTable(data.configs));
    } catch (err) {
      clear(configsBox).append(el("div.error-text", { text: err.message }));
      notify(err.message, "error");
    }
  }

  const stops = [
    poll(async () => {
      state.cluster = await api("GET", ROUTES.cluster);
      renderBrokers();
    }, 2000),
    poll(refreshPartitions, () => Math.max(5000, 20 * loadMs)),
    stream({ cluster: onChange }),
  ];
  return () => stops.forEach((s) => s());
}

// Configs come as a list of {name, value, source, ...} or as an object name -> value.
export function configEntries(data) {
  const list = Array.isArray(data) ? data : data && Array.isArray(data.configs) ? data.configs : null;
  if (list) return list.map((c) => ({ name: c.name, value: c.value, source: c.source ?? "", sensitive: !!c.sensitive }));
  const obj = data && data.configs && typeof data.configs === "object" ? data.configs : data || {};
  return Object.entries(obj).map(([name, value]) => ({ name, value, source: "" }));
}

export function configTable(data) {
  const tbody = el("tbody");
  for (const c of configEntries(data).sort((a, b) => a.name.localeCompare(b.name))) {
    tbody.append(el("tr", { "data-config": c.name },
      el("td", { text: c.name }), el("td", { text: c.sensitive ? "(sensitive)" : String(c.value ?? "") }),
      el("td.muted", { text: c.source })));
  }
  return el("table.plain.configs", null,
    el("thead", null, el("tr", null, el("th", { text: "name" }), el("th", { text: "value" }), el("th", { text: "source" }))), tbody);
}
