// A connection's role in the fan-out pictures (one client's, and the cluster's live one):
// which role a connection is drawn as, its colour, and the legend. One place for both.
import { el } from "./core.js";

// The roles drawn, in the legend's order, each with its colour (console.css draws the
// lines with the same variables: svg.fanout .ROLE).
export const ROLES = [
  ["partition-leader", "var(--accent)"], ["group-coordinator", "var(--ok)"],
  ["txn-coordinator", "var(--warn)"], ["admin", "var(--purple)"],
  ["bootstrap", "var(--neutral)"], ["other", "var(--fan-other)"],
];

// A connection's role for the picture: its first of coordinator, leader, admin, bootstrap.
export function mainRole(roles) {
  for (const want of ["group-coordinator", "txn-coordinator", "partition-leader", "admin", "bootstrap"]) {
    if (roles.includes(want)) return want;
  }
  if (roles.some((r) => r.includes("coordinator"))) return "group-coordinator";
  if (roles.some((r) => r.includes("leader"))) return "partition-leader";
  return "other";
}

// {role: n} for every drawn role, counted over connections (each with .roles).
export function roleCounts(conns) {
  const counts = Object.fromEntries(ROLES.map(([r]) => [r, 0]));
  for (const c of conns) counts[mainRole(c.roles)] += 1;
  return counts;
}

// The colour key, with each role's count.
export function legend(counts) {
  return el("div.legend", null,
    ...ROLES.map(([r, c]) => el("span", { "data-role": r }, el("i", { style: `background:${c}` }), `${r} ${counts[r] ?? 0}`)));
}
