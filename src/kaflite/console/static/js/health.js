// Health: the doctor's report on the request log (GET /api/health, as `kaflite doctor`):
// the named findings with their evidence first, then each client's health. When the log
// is off, the panel says so and how to turn it on.
import { ROUTES, api, clear, el, fmtNum, poll } from "./core.js";

const WINDOWS = [["10", "from 10 minutes back"], ["60", "from an hour back"], ["0", "the whole log"]];
const clock = (t) => (t === null || t === undefined ? "" : new Date(t * 1000).toISOString().slice(11, 23));
const ms = (v) => (v === null || v === undefined ? "–" : `${Math.round(v)} ms`);

export function mount(root) {
  const windowSel = el("select#health-window", { "aria-label": "read the request log" },
    ...WINDOWS.map(([v, label]) => el("option", { value: v, text: label })));
  const summary = el("div.muted#health-summary");
  const findings = el("div#health-findings");
  const clients = el("div#health-clients");
  root.append(el("section.card", null, el("h2", { text: "Health" }),
    el("div.muted", { text: "What the request log (__kaflite_requests) says about each client, and the anti-patterns the doctor finds in it (docs/doctor.md). Reported over everything read since the view started reading." }),
    el("div.toolbar", null, el("label", null, "read ", windowSel), summary)),
  findings, clients);
  let minutes = windowSel.value;
  windowSel.addEventListener("change", () => { minutes = windowSel.value; refresh(); });

  async function refresh() {
    const report = await api("GET", ROUTES.health, undefined, { minutes });
    root.dataset.enabled = report.enabled ? "1" : "0";
    if (!report.enabled) {
      summary.textContent = "";
      clear(clients);
      clear(findings).append(el("section.card#health-off", null,
        el("h3", { text: "The request log is off" }),
        el("p", { text: report.message }),
        el("p", { text: report.how_to_enable })));
    } else {
      summary.textContent = report.first === null
        ? "no requests in the log for this period"
        : `${fmtNum(report.records)} requests from ${clock(report.first)} to ${clock(report.last)} UTC · brokers ${report.brokers.join(", ") || "–"} · ${report.clients.length} clients`;
      drawFindings(findings, report.findings);
      drawClients(clients, report.clients, report.findings);
    }
    root.dataset.ready = "1";
  }
  return poll(refresh, 5000);
}

function drawFindings(box, list) {
  const head = el("h2", { text: list.length ? `Findings (${list.length})` : "Findings" });
  if (!list.length) {
    clear(box).append(el("section.card#findings", { "data-findings": "0" }, head,
      el("div.muted", { text: "No findings: no client or group shows any of the six anti-patterns." })));
    return;
  }
  clear(box).append(el("section.card#findings", { "data-findings": String(list.length) }, head,
    ...list.map((f) => el("article.finding", { "data-finding": f.name, "data-subject": f.subject },
      el("h3", null, el("span.state-down", { text: f.name }), ` ${f.subject}`),
      el("p", { text: f.explanation }),
      el("div.kv.counts", null, ...Object.entries(f.counts).flatMap(([k, v]) => [
        el("span.muted", { text: k }), el("span", { "data-count": k, text: fmtNum(v) })])),
      f.records.length ? evidence(f.records) : null))));
}

function evidence(records) {
  const head = ["time (UTC)", "broker", "connection", "client id", "api", "partitions", "group", "errors"];
  return el("table.plain.evidence", { "data-table": "evidence" },
    el("thead", null, el("tr", null, ...head.map((h) => el("th", { text: h })))),
    el("tbody", null, ...records.map((e) => el("tr", null,
      el("td", { text: clock(e.timestamp) }), el("td", { text: e.broker }),
      el("td", { text: `#${e.connection_id}` }), el("td", { text: e.client_id ?? "" }),
      el("td", { text: e.api }),
      el("td.wrap", { text: e.partitions.slice(0, 6).join(", ") + (e.partitions.length > 6 ? " …" : "") }),
      el("td", { text: e.group ?? "" }),
      el("td", { text: e.errors.map(([n, c]) => `${n} ×${c}`).join(", ") })))));
}

function roles(c) {
  return Object.entries(c.by_role).map(([role, per]) =>
    `${role} ${Object.entries(per).map(([b, n]) => `b${b}:${n}`).join(" ")}`).join("; ");
}

function groups(c) {
  return c.groups.map((g) => `${g.group} (${g.protocol}): ${g.rebalances} rebalances, ` +
    `${g.protocol === "consumer" ? "epochs" : "generations"} ${g.generations.join(",") || "–"}` +
    (g.rebalance_median_ms === null ? "" : `, rebalance median ${ms(g.rebalance_median_ms)}`) +
    `; heartbeat ${ms(g.heartbeat_interval_ms)}, commit ${ms(g.commit_interval_ms)}`).join("\n");
}

function drawClients(box, list, findings) {
  const named = new Map();
  for (const f of findings) named.set(f.subject, [...(named.get(f.subject) ?? []), f.name]);
  const head = ["client", "software", "requests", "errors", "connections by role and broker",
    "metadata", "recovery", "groups", "throttled", "findings"];
  const rows = list.map((c) => {
    const m = c.metadata;
    const r = c.recovery;
    const reasons = Object.entries(m.reasons).map(([why, n]) => `${why} ${n}`).join(", ");
    const errors = Object.entries(c.errors).map(([n, k]) => `${n} ×${k}`).join(", ");
    const found = named.get(c.subject) ?? [];
    return el("tr", { "data-client": c.client_id ?? "", "data-findings": found.join(" ") },
      el("td", { text: c.subject }),
      el("td", { text: c.software.join(", ") }),
      el("td", { text: fmtNum(c.requests) }),
      el(`td.wrap${errors ? ".under-replicated" : ""}`, { text: errors || "–" }),
      el("td.wrap", { "data-col": "roles", text: `${c.connections.length}: ${roles(c)}` }),
      el("td.wrap", { text: `${m.requests} (${m.per_minute}/min, peak ${m.peak_per_minute})${reasons ? `: ${reasons}` : ""}` }),
      el("td.wrap", { text: r.recovered || r.unrecovered ? `${r.recovered} recovered, median ${ms(r.median_ms)}, max ${ms(r.max_ms)}; ${r.unrecovered} not` : "–" }),
      el("td.wrap", { text: groups(c) || "–" }),
      el("td", { text: c.throttle.throttled_requests ? `${c.throttle.throttled_requests} (${c.throttle.total_ms} ms)` : "–" }),
      el(`td${found.length ? ".state-down" : ""}`, { text: found.join(", ") || "–" }));
  });
  clear(box).append(el("section.card", null, el("h2", { text: `Clients (${list.length})` }),
    list.length === 0 ? el("div.muted", { text: "no client requests in the log for this period" })
      : el("table.plain#health-clients-table", { "data-table": "health-clients" },
        el("thead", null, el("tr", null, ...head.map((h) => el("th", { text: h })))),
        el("tbody", null, ...rows))));
}
