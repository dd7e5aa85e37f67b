// Topics: create, delete, add partitions, edit configs; the message browser.
import { ROUTES, act, api, clear, el, field, fmtBytes, fmtNum, fmtTime, formData, poll } from "./core.js";
import { configTable } from "./cluster.js";
import { VTable, filterBox } from "./vtable.js";

const TOPIC_COLUMNS = [
  { key: "name", label: "topic", grow: 2, text: (t) => t.name },
  { key: "partitions", label: "partitions", grow: 1, text: (t) => t.partitions, sort: (t) => t.partitions },
  { key: "rf", label: "replication", grow: 1, text: (t) => t.replication_factor },
  { key: "urp", label: "under-replicated", grow: 1, text: (t) => t.under_replicated ?? "",
    cls: (t) => (t.under_replicated ? "under-replicated" : "") },
  { key: "messages", label: "messages", grow: 1, text: (t) => fmtNum(t.messages), sort: (t) => t.messages ?? -1 },
  { key: "size", label: "size", grow: 1, text: (t) => fmtBytes(t.size_bytes), sort: (t) => t.size_bytes ?? -1 },
];

// "a=1\nb=2" -> {a: "1", b: "2"}; a line without "=" is an error the server never sees.
export function parsePairs(text, what) {
  const out = {};
  for (const raw of (text || "").split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const i = line.indexOf("=");
    if (i <= 0) throw new Error(`${what}: "${line}" is not name=value`);
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

// A record's key or value ({text, base64, json, size} or null) as text, or pretty JSON.
export function renderBytes(b, mode) {
  if (b === null || b === undefined) return "null";
  if (b.text === null || b.text === undefined) return `base64:${b.base64}`;
  if (mode === "json" && b.json) {
    try {
      return JSON.stringify(JSON.parse(b.text), null, 2);
    } catch {
      return b.text;
    }
  }
  return b.text;
}

export function mount(root, selected) {
  const table = new VTable(TOPIC_COLUMNS, { key: (t) => t.name, name: "topics", height: "30vh",
    onClick: (t) => { location.hash = `#topics/${encodeURIComponent(t.name)}`; } });
  const internal = el("input", { type: "checkbox" });
  const createErr = el("div.error-text#create-topic-error");
  const createForm = el("form.inline#create-topic", null,
    field("name", el("input", { name: "name", required: true, placeholder: "orders" })),
    field("partitions", el("input", { name: "partitions", type: "number", value: "3", style: "width:6em" })),
    field("replication factor", el("input", { name: "replication_factor", type: "number", value: "-1", style: "width:6em" })),
    field("configs (name=value per line)", el("textarea", { name: "configs", rows: 1, cols: 32, placeholder: "retention.ms=86400000" })),
    el("button", { type: "submit", text: "Create topic" }));
  createForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(createForm);
    const done = await act(`create topic ${f.name}`, async () => api("POST", ROUTES.topics, {
      name: f.name ?? "",
      partitions: f.partitions === undefined ? 1 : Number(f.partitions),
      replication_factor: f.replication_factor === undefined ? -1 : Number(f.replication_factor),
      configs: parsePairs(f.configs, "configs"),
    }), createErr);
    if (done) {
      await refresh();
      location.hash = `#topics/${encodeURIComponent(done.name)}`;
    }
  });
  const detail = el("div#topic-detail");
  root.append(
    el("section.card", null, el("h2", { text: "Topics" }),
      el("div.toolbar", null, filterBox(table, "filter topics…"), el("label", null, internal, " internal"), table.count),
      table.root),
    el("section.card", null, el("h2", { text: "Create a topic" }), createForm, createErr),
    detail);
  internal.addEventListener("change", () => refresh());

  async function refresh() {
    table.setRows(await api("GET", ROUTES.topics, undefined, { internal: internal.checked ? 1 : 0 }));
    root.dataset.ready = "1";
  }
  if (selected) showTopic(detail, selected, refresh);
  return poll(refresh, 5000);
}

async function showTopic(box, name, refreshList) {
  clear(box);
  let topic;
  try {
    topic = await api("GET", ROUTES.topic(name));
  } catch (err) {
    box.append(el("section.card", null, el("div.error-text", { text: err.message })));
    return;
  }
  const err = el("div.error-text");
  const del = el("button.danger#delete-topic", { type: "button", text: `Delete ${name}` });
  del.addEventListener("click", async () => {
    if (!window.confirm(`Delete topic ${name}?`)) return;
    if (await act(`delete topic ${name}`, () => api("DELETE", ROUTES.topic(name)), err)) {
      await refreshList();
      location.hash = "#topics";
    }
  });
  const addForm = el("form.inline#add-partitions", null,
    field("new partition count", el("input", { name: "count", type: "number", value: String(topic.partitions.length + 1), style: "width:7em" })),
    el("button", { type: "submit", text: "Add partitions" }));
  addForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const count = formData(addForm).count;
    if (await act(`partitions of ${name}`, () => api("POST", ROUTES.topicPartitions(name), { count: count === undefined ? null : Number(count) }), err)) {
      showTopic(box, name, refreshList);
    }
  });
  const cfgForm = el("form.inline#edit-config", null,
    field("config", el("input", { name: "name", placeholder: "retention.ms", list: "config-names" })),
    field("value (empty: delete, back to the default)", el("input", { name: "value", size: 20 })),
    el("button", { type: "submit", text: "Set config" }));
  const names = el("datalist#config-names", null, ...topic.configs.map((c) => el("option", { value: c.name })));
  const cfgBox = el("div", null, configTable(topic.configs));
  cfgForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(cfgForm);
    const body = f.value === undefined ? { set: {}, delete: [f.name ?? ""] } : { set: { [f.name ?? ""]: f.value }, delete: [] };
    const done = await act(`config of ${name}`, () => api("POST", ROUTES.topicConfigs(name), body), err);
    if (done) clear(cfgBox).append(configTable(done.configs));
  });
  box.append(
    el("section.card", { "data-topic": name }, el("h2", { text: `Topic ${name}` }),
      el("div.muted", { text: `id ${topic.topic_id} · ${topic.partitions.length} partitions` }),
      el("div.toolbar", null, del), addForm, err),
    browser(name, topic.partitions.map((p) => p.partition)),
    el("section.card", null, el("h2", { text: "Configs" }), cfgForm, names, cfgBox));
}

// The message browser: by partition and offset, timestamp, or the latest/earliest records.
function browser(topic, partitions) {
  const err = el("div.error-text");
  const out = el("div#messages");
  const mode = el("select", { name: "from" }, ...["latest", "earliest", "offset", "timestamp"].map((m) => el("option", { value: m, text: m })));
  const form = el("form.inline#browse", null,
    field("partition", el("select", { name: "partition" }, el("option", { value: "", text: "all" }),
      ...partitions.map((p) => el("option", { value: String(p), text: String(p) })))),
    field("from", mode),
    field("offset (negative: from the end)", el("input", { name: "offset", size: 8 })),
    field("timestamp (UTC)", el("input", { name: "timestamp", type: "datetime-local", step: "1" })),
    field("limit", el("input", { name: "limit", type: "number", value: "50", style: "width:5em" })),
    field("isolation", el("select", { name: "isolation" }, el("option", { value: "read_uncommitted", text: "read_uncommitted" }),
      el("option", { value: "read_committed", text: "read_committed" }))),
    field("search", el("input", { name: "search", type: "search", placeholder: "key, value or header" })),
    field("show as", el("select", { name: "render" }, el("option", { value: "text", text: "text" }), el("option", { value: "json", text: "JSON" }))),
    el("button", { type: "submit", text: "Browse" }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(form);
    const query = { partition: f.partition, limit: f.limit, isolation: f.isolation, search: f.search };
    if (f.from === "offset") query.offset = f.offset ?? "";
    else if (f.from === "timestamp") query.timestamp = f.timestamp ? String(Date.parse(`${f.timestamp}Z`)) : "";
    else query.from = f.from;
    const data = await act(`browse ${topic}`, () => api("GET", ROUTES.messages(topic), undefined, query), err);
    if (data) clear(out).append(recordTable(data, f.render || "text"));
  });
  return el("section.card", null, el("h2", { text: "Messages" }), form, err, out);
}

function recordTable(data, render) {
  const tbody = el("tbody");
  for (const r of data.records) {
    tbody.append(el("tr", { "data-offset": r.offset, "data-partition": r.partition },
      el("td", { text: r.partition }), el("td", { text: r.offset }),
      el("td", { text: fmtTime(r.timestamp_ms) }),
      el("td", null, el("pre.value", { text: renderBytes(r.key, render) })),
      el("td", null, el("pre.value", { text: renderBytes(r.value, render) })),
      el("td", null, el("pre.value", { text: (r.headers || []).map((h) => `${h.key}=${renderBytes(h.value, "text")}`).join("\n") }))));
  }
  return el("div", null,
    el("div.muted", { text: `${data.records.length} records (${data.isolation}; ${data.scanned} scanned)` }),
    el("table.plain.records", null, el("thead", null, el("tr", null,
      ...["partition", "offset", "timestamp (UTC)", "key", "value", "headers"].map((h) => el("th", { text: h })))), tbody));
}
