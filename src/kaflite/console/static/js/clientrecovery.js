// Recovery per client (GET /api/recovery): for each client that had an error, how long it
// took to work again and the steps it took: the error, the metadata (or coordinator)
// lookup, a new connection, the first success of the same API, with the milliseconds
// between them. The table lists the clients (the still recovering first); a click shows
// one client's episodes, newest first. The source (the connection registry) is said.
import { ROUTES, api, clear, el } from "./core.js";
import { VTable } from "./vtable.js";

const clock = (t) => new Date(t * 1000).toISOString().slice(11, 23);
export const ms = (v) => (v === null || v === undefined ? "" : `${Number(v) < 10 ? Number(v).toFixed(1) : Math.round(v)} ms`);
const STEP_NAMES = { error: "error", metadata: "metadata", "find-coordinator": "find coordinator", connection: "new connection", success: "success" };

// "error → metadata +89 ms → success +2 ms": an episode's steps on one line.
export function stepsText(ep) {
  return ep.steps.map((s, i) => (i === 0 ? STEP_NAMES[s.kind] : `${STEP_NAMES[s.kind]} +${ms(s.after_previous_ms)}`)).join(" → ")
    + (ep.recovered ? "" : " → …");
}

// The time a client took: the newest episode's, or how long it has been waiting.
export function recoveryText(c) {
  const ep = c.episodes[0];
  return ep.recovered ? ms(ep.recovery_ms) : `recovering for ${ms(ep.waiting_ms)}`;
}

const COLUMNS = [
  { key: "client", label: "client id", grow: 2, max: 18, text: (c) => c.client_id ?? "(none)" },
  { key: "host", label: "host", max: 10, text: (c) => c.host },
  { key: "status", label: "status", text: (c) => c.status, cls: (c) => (c.status === "recovering" ? "recovering" : "recovered") },
  { key: "recovery", label: "recovery", max: 14, text: recoveryText, sort: (c) => c.episodes[0].recovery_ms ?? c.episodes[0].waiting_ms },
  { key: "worst", label: "worst", text: (c) => ms(c.worst_recovery_ms), sort: (c) => c.worst_recovery_ms ?? -1 },
  { key: "episodes", label: "episodes", text: (c) => c.episodes_total, sort: (c) => c.episodes_total },
  { key: "error", label: "last error", grow: 1, max: 22, text: (c) => `${c.episodes[0].api} ${c.episodes[0].error} @ broker ${c.episodes[0].broker}` },
  { key: "steps", label: "steps", grow: 2, max: 30, text: (c) => stepsText(c.episodes[0]) },
];

const keyOf = (c) => `${c.client_id ?? ""}\u0000${c.host}`;

function episodeView(ep) {
  const head = `${clock(ep.at)} ${ep.api} ${ep.error} on broker ${ep.broker}`
    + (ep.errors > 1 ? ` (×${ep.errors})` : "")
    + (ep.recovered ? ` · recovered in ${ms(ep.recovery_ms)}` : ` · still recovering (${ms(ep.waiting_ms)})`);
  const steps = el("ol.steps", null, ...ep.steps.map((s) => el("li", { "data-step": s.kind },
    el("span.step-kind", { text: STEP_NAMES[s.kind] }),
    ` ${clock(s.at)} · broker ${s.broker} · ${s.detail}`,
    s.kind === "error" ? null : el("span.muted", { text: ` · +${ms(s.after_previous_ms)} (${ms(s.after_error_ms)} after the error)` }))));
  return el("article.episode", { "data-recovered": ep.recovered ? "1" : "0" },
    el("h4", { text: head }), steps, ep.note ? el("div.muted.note", { text: ep.note }) : null);
}

export function clientRecovery() {
  let selected = null;
  let rows = [];
  const table = new VTable(COLUMNS, { key: keyOf, name: "client-recovery", height: "30vh",
    onClick: (c) => { selected = keyOf(c); draw(); } });
  table.rowClass = (c) => (keyOf(c) === selected ? "selected" : "");
  const source = el("div.muted#client-recovery-source");
  const detail = el("div#client-recovery-detail");
  const empty = el("div.muted#client-recovery-empty", { text: "No client has had an error yet." });

  function draw() {
    table.setRows(rows);
    table.schedule();
    const c = rows.find((r) => keyOf(r) === selected);
    if (!c) {
      clear(detail).append(el("div.muted", { text: rows.length ? "click a client for its timeline" : "" }));
      return;
    }
    const older = c.episodes_total - c.episodes.length;
    clear(detail).append(el("div", null,
      el("h3", { text: `${c.client_id ?? "(none)"} @ ${c.host}${c.software ? ` (${c.software})` : ""}` }),
      ...c.episodes.map(episodeView),
      older > 0 ? el("div.muted", { text: `… ${older} older episodes` }) : null));
    detail.dataset.client = c.client_id ?? "";
  }

  async function refresh() {
    const report = await api("GET", ROUTES.recovery);
    rows = report.clients;
    source.textContent = `From ${report.source_text}.`;
    source.dataset.source = report.source;
    empty.hidden = rows.length > 0;
    if (selected === null && rows.length) selected = keyOf(rows[0]);
    draw();
  }

  return {
    root: el("div#client-recovery", null, source, empty, table.root, table.count, detail),
    refresh,
  };
}
