// A share group (KIP-932): its members and, per share-partition, the start offset (SPSO),
// the lag and the in-flight records past it: acquired by a member (with how long its lock
// has left), available for the next fetch, acknowledged, or archived, each with the times
// it was delivered. Kafka itself shows tools only the start offset and lag; the in-flight
// records come from a kaflite cluster's partition leaders (GET /api/groups/{id}/share-partitions).
import { ROUTES, api, el, fmtNum } from "./core.js";

const STATES = ["acquired", "available", "acknowledged", "archived"];
const tp = (p) => `${p.topic}-${p.partition}`;

export async function loadSharePartitions(id) {
  return api("GET", ROUTES.sharePartitions(id));
}

export function shareMembersView(g) {
  if (g.members.length === 0) return el("div.muted", { text: "no members" });
  return plain(["client id", "member id", "host", "assignment"], g.members.map((m) => [
    m.client_id, m.member_id, m.host, m.assignment.map(tp).join(", ") || "–"]), "share-members");
}

export function sharePartitionsView(s) {
  const names = new Map(s.members.map((m) => [m.member_id, m.client_id || m.member_id]));
  const who = (id) => (id ? names.get(id) ?? id : "");
  const box = el("div#share-partitions", { "data-in-flight-shown": s.in_flight_shown ? "1" : "0" });
  if (!s.in_flight_shown) box.append(el("p.note#share-note", { text: s.note }));
  const summary = s.partitions.map((p) => {
    const f = p.in_flight;
    return el("tr", { "data-tp": tp(p) },
      el("td", { text: p.topic }), el("td", { text: p.partition }),
      el("td", { "data-col": "start", text: p.start_offset ?? "" }),
      el("td", { "data-col": "lag", text: p.lag === null ? "" : fmtNum(p.lag) }),
      el("td.wrap", { text: p.members.map(who).join(", ") || "–" }),
      ...STATES.map((k) => el(`td.rs-${k}`, { "data-col": k, text: f ? f.counts[k] : "" })),
      el("td", { "data-col": "in_flight", text: f ? f.in_flight : p.error ?? "" }));
  });
  box.append(el("table.plain", { "data-table": "share-offsets" },
    el("thead", null, el("tr", null, ...["topic", "partition", "start offset (SPSO)", "lag",
      "members", ...STATES, "in flight"].map((h) => el("th", { text: h })))),
    el("tbody", null, ...summary)));
  if (!s.in_flight_shown) return box;
  for (const p of s.partitions) box.append(inFlightView(p, who, s.limit));
  return box;
}

function inFlightView(p, who, limit) {
  const f = p.in_flight;
  const section = el("div.share-partition", { "data-tp": tp(p) });
  if (p.error) {
    section.append(el("h4", { text: tp(p) }), el("div.error-text", { text: p.error }));
    return section;
  }
  if (!f) {
    section.append(el("h4", { text: tp(p) }), el("div.muted", { text: "no share state on the leader yet" }));
    return section;
  }
  const span = f.in_flight ? `offsets ${f.start_offset}–${f.end_offset - 1}` : `nothing in flight, next offset ${f.start_offset}`;
  section.append(el("h4", { text: `${tp(p)} · ${span}` }));
  if (!f.live) section.append(el("div.muted.share-source", { text: "No member fetches this partition now: its persisted state (__share_group_state), where nothing is acquired." }));
  if (f.records.length === 0) return section;
  const rows = f.records.map((r) => el("tr", { "data-offset": r.offset, "data-state": r.state },
    el("td", { text: r.offset }),
    el(`td.rs-${r.state}`, { "data-col": "state", text: r.state }),
    el("td", { "data-col": "deliveries", text: `${r.delivery_count} of ${f.delivery_count_limit}` }),
    el("td", { "data-col": "holder", text: who(r.member_id), title: r.member_id ?? "" }),
    el("td", { "data-col": "lock", text: r.lock_remaining_ms === null ? "" : `${(r.lock_remaining_ms / 1000).toFixed(1)} s` })));
  section.append(el("table.plain", { "data-table": "in-flight" },
    el("thead", null, el("tr", null, ...["offset", "state", "delivered", "held by", "lock left"].map((h) => el("th", { text: h })))),
    el("tbody", null, ...rows)));
  if (f.truncated) section.append(el("div.muted", { text: `the first ${f.records.length} of ${fmtNum(f.in_flight)} in flight (at most ${limit} listed)` }));
  return section;
}

function plain(headers, rows, name) {
  return el("table.plain", { "data-table": name },
    el("thead", null, el("tr", null, ...headers.map((h) => el("th", { text: h })))),
    el("tbody", null, ...rows.map((r) => el("tr", null, ...r.map((c) => el("td", { text: c ?? "" }))))));
}
