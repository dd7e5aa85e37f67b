// A consumer group of Kafka 4's protocol (KIP-848), as its coordinator describes it: the
// group epoch (bumped by each change of members or subscriptions), the target assignment's
// epoch, and per member its epoch, what it owns now, what the target gives it, and what
// has still to move: a member behind the target epoch is revoking what the target gives
// to others (Kafka does not describe those partitions); one at the target epoch waits
// for the partitions of its target that another member has not released yet.
import { el } from "./core.js";

// member_state (GET /api/groups/{id}) -> what the page says, and its colour
const STATES = {
  stable: ["stable", "state-up"],
  unrevoked_partitions: ["revoking", "state-isolated"],
  unreleased_partitions: ["waiting for partitions", "state-isolated"],
};

const tp = (a) => `${a.topic}-${a.partition}`;
const tps = (list) => list.map(tp).join(", ") || "–";

export function memberStateLabel(state) {
  return (STATES[state] || [state])[0];
}

export function consumerGroupView(g) {
  const names = new Map(g.members.map((m) => [m.member_id, m.client_id || m.member_id]));
  const pair = (label, value, key) => [el("span.muted", { text: label }), el("span", { "data-field": key, text: value })];
  const epochs = el("div.kv#kip848-epochs", { "data-group-epoch": g.group_epoch, "data-assignment-epoch": g.assignment_epoch,
    "data-reconciling": g.reconciling },
  ...pair("group epoch", g.group_epoch, "group_epoch"),
  ...pair("target assignment epoch", g.assignment_epoch, "assignment_epoch"),
  ...pair("assignor", g.assignor ?? "", "assignor"),
  ...pair("members reconciling", `${g.reconciling} of ${g.members.length}`, "reconciling"));
  const head = ["client id", "member id", "host", "member epoch", "state", "current assignment",
    "target assignment", "to move", "subscription"];
  const rows = g.members.map((m) => {
    const [label, cls] = STATES[m.member_state] || [m.member_state, ""];
    const behind = m.member_epoch !== g.assignment_epoch;
    const moving = m.waiting_for.map((a) => `+${tp(a)}${a.held_by ? ` (held by ${names.get(a.held_by) ?? a.held_by})` : ""}`);
    if (behind) moving.unshift(`revoking before epoch ${g.assignment_epoch}`);
    const subscription = m.subscribed_regex ? `/${m.subscribed_regex}/` : m.subscribed_topics.join(", ");
    return el("tr", { "data-member": m.member_id, "data-client": m.client_id, "data-state": m.member_state },
      el("td", { text: m.client_id }),
      el("td", { text: `${m.member_id.slice(0, 10)}…`, title: m.member_id }),
      el("td", { text: m.host }),
      el(`td${behind ? ".under-replicated" : ""}`, { "data-col": "epoch",
        text: behind ? `${m.member_epoch} (target ${g.assignment_epoch})` : String(m.member_epoch) }),
      el(`td.${cls}`, { "data-col": "state", text: label }),
      el("td.wrap", { "data-col": "current", text: tps(m.assignment) }),
      el("td.wrap", { "data-col": "target", text: tps(m.target_assignment) }),
      el("td.wrap", { "data-col": "moving", text: moving.join(", ") || "–" }),
      el("td.wrap", { text: subscription }));
  });
  return el("div#kip848", null, epochs,
    el("div.muted", { text: "A member reaches the target epoch once it owns its target assignment: it first revokes what the target gives to others; a partition moves to its new owner once the old one has released it." }),
    rows.length === 0 ? el("div.muted", { text: "no members" }) : el("table.plain", { "data-table": "kip848-members" },
      el("thead", null, el("tr", null, ...head.map((h) => el("th", { text: h })))), el("tbody", null, ...rows)));
}
