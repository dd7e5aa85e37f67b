// Consumer groups: state, members and assignments, committed offsets and lag per partition,
// lag over time (a chart), reset offsets on an empty group, delete.
import { ROUTES, act, api, clear, el, field, fmtNum, formData, poll } from "./core.js";
import { VTable, filterBox } from "./vtable.js";
import { consumerGroupView } from "./kip848.js";
import { loadSharePartitions, shareMembersView, sharePartitionsView } from "./share.js";
import { lineChart } from "./plot.js";

const GROUP_COLUMNS = [
  { key: "group", label: "group", grow: 2, text: (g) => g.group_id },
  { key: "type", label: "type", grow: 1, text: (g) => g.type },
  { key: "protocol", label: "protocol type", grow: 1, text: (g) => g.protocol_type ?? "" },
  { key: "state", label: "state", grow: 1, text: (g) => g.state },
  { key: "members", label: "members", grow: 1, text: (g) => g.members, sort: (g) => g.members },
  { key: "lag", label: "lag", grow: 1, text: (g) => (g.lag === null ? "" : fmtNum(g.lag)), sort: (g) => g.lag ?? -1 },
  { key: "coordinator", label: "coordinator", grow: 1, text: (g) => g.coordinator ?? "" },
];

// What a reset may go to: [the API's `to`, the option's text].
const RESET_TO = [["earliest", "earliest"], ["latest", "latest"], ["timestamp", "a timestamp"],
  ["offset", "an offset"], ["shift", "shift by N records"], ["duration", "back by a duration"]];

// "90s", "15m", "2h", "1d", "500ms" or a bare number of milliseconds -> milliseconds; anything
// else is sent as it is, for the server to refuse with a clear error.
export function parseDuration(text) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text ?? "");
  if (!m) return text ?? null;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] || "ms"];
  return Math.round(Number(m[1]) * unit);
}

export function mount(root, selected) {
  const table = new VTable(GROUP_COLUMNS, { key: (g) => g.group_id, name: "groups", height: "28vh",
    onClick: (g) => { location.hash = `#groups/${encodeURIComponent(g.group_id)}`; } });
  const detail = el("div#group-detail");
  root.append(el("section.card", null, el("h2", { text: "Consumer groups" }),
    el("div.toolbar", null, filterBox(table, "filter groups…"), table.count), table.root), detail);
  const stops = [poll(async () => {
    table.setRows(await api("GET", ROUTES.groups));
    if (!selected) root.dataset.ready = "1";
  }, 3000)];
  if (selected) stops.push(groupDetail(detail, selected, () => { root.dataset.ready = "1"; }));
  return () => stops.forEach((s) => s());
}

function groupDetail(box, id, ready) {
  const head = el("div.muted");
  const members = el("div");
  const offsets = el("div");
  const offsetsHead = el("h3", { text: "Offsets and lag" });
  const chartBox = el("div.chart");
  const err = el("div.error-text");
  const chart = lineChart(chartBox, "lag (records)", ["lag"], 220);
  const resetForm = el("form.inline#reset-offsets", null,
    field("to", el("select", { name: "to" }, ...RESET_TO.map(([t, text]) => el("option", { value: t, text })))),
    field("offset", el("input", { name: "offset", size: 8 })),
    field("timestamp (UTC)", el("input", { name: "timestamp", type: "datetime-local", step: "1" })),
    field("shift by (records; negative: back)", el("input", { name: "shift", size: 8 })),
    field("back by (90s, 15m, 2h, 1d)", el("input", { name: "duration", size: 8, placeholder: "15m" })),
    field("topic (empty: all)", el("input", { name: "topic" })),
    field("partitions (e.g. 0,2)", el("input", { name: "partitions", size: 8 })),
    el("button", { type: "submit", text: "Reset offsets" }));
  resetForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = formData(resetForm);
    const body = { to: f.to };
    if (f.to === "offset") body.offset = f.offset === undefined ? null : Number.isNaN(Number(f.offset)) ? f.offset : Number(f.offset);
    if (f.to === "timestamp") body.timestamp = f.timestamp ? Date.parse(`${f.timestamp}Z`) : null;
    if (f.to === "shift") body.shift = f.shift === undefined ? null : Number.isNaN(Number(f.shift)) ? f.shift : Number(f.shift);
    if (f.to === "duration") body.duration_ms = parseDuration(f.duration);
    if (f.topic) body.topic = f.topic;
    if (f.partitions) body.partitions = f.partitions.split(",").map((p) => (Number.isNaN(Number(p)) ? p.trim() : Number(p)));
    if (await act(`reset offsets of ${id}`, () => api("POST", ROUTES.groupReset(id), body), err)) refresh();
  });
  const del = el("button.danger#delete-group", { type: "button", text: `Delete group ${id}` });
  del.addEventListener("click", async () => {
    if (!window.confirm(`Delete group ${id}?`)) return;
    if (await act(`delete group ${id}`, () => api("DELETE", ROUTES.group(id)), err)) location.hash = "#groups";
  });
  clear(box).append(el("section.card", { "data-group": id }, el("h2", { text: `Group ${id}` }), head,
    el("h3", { text: "Members" }), members,
    offsetsHead, offsets,
    el("h3", { text: "Lag over time" }), chartBox,
    el("h3", { text: "Reset offsets (the group must be empty)" }), resetForm,
    el("div.toolbar", null, del), err));

  async function refresh() {
    let g;
    try {
      g = await api("GET", ROUTES.group(id));
    } catch (e) {
      err.textContent = `group ${id}: ${e.message}`;
      throw e;
    }
    if (err.textContent.startsWith(`group ${id}:`)) err.textContent = "";
    head.textContent = `${g.type} group · protocol ${g.protocol_type ?? ""} ${g.protocol ?? ""} · state ${g.state} · coordinator ${g.coordinator ?? "?"} · lag ${fmtNum(g.lag)}`;
    head.dataset.lag = String(g.lag);
    if (g.type === "consumer") clear(members).append(consumerGroupView(g));
    else if (g.type === "share") clear(members).append(shareMembersView(g));
    else clear(members).append(g.members.length === 0 ? el("div.muted", { text: "no members" }) : table(["member id", "client id", "host", "instance id", "assignment"], g.members.map((m) => [
      m.member_id, m.client_id, m.host, m.instance_id ?? "",
      m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", ")])));
    if (g.type === "share") {
      offsetsHead.textContent = "Share-partitions: start offsets, lag and in-flight records";
      // fetched before the section is cleared: clearing first would blank the table for
      // the whole round trip at every refresh
      const shares = await loadSharePartitions(id);
      clear(offsets).append(sharePartitionsView(shares));
    } else {
      clear(offsets).append(table(["topic", "partition", "committed", "log end", "lag", "metadata"], g.offsets.map((o) => [
        o.topic, o.partition, o.committed, o.log_end_offset, o.lag, o.metadata ?? ""]), "offsets"));
    }
    const hist = await api("GET", ROUTES.lagHistory(id));
    chart.set([hist.points.map((p) => p.t), hist.points.map((p) => p.lag)]);
    ready();
  }
  const stop = poll(refresh, 2000);
  return () => {
    stop();
    chart.destroy();
  };
}

function table(headers, rows, name) {
  return el("table.plain", { "data-table": name || "" },
    el("thead", null, el("tr", null, ...headers.map((h) => el("th", { text: h })))),
    el("tbody", null, ...rows.map((r) => el("tr", null, ...r.map((c) => el("td", { text: c ?? "" }))))));
}
