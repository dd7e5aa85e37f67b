"""The checks: each turns a client's or a group's state into a named finding, or none.

Every check compares counts with a threshold of ``Thresholds`` (``_thresholds.py``
says why each has its value) and, when it fires, keeps the counts and a few records
as the evidence, with one line that tells a user what it means and what to do.
"""

from __future__ import annotations

from kaflite.doctor._client import ClientState
from kaflite.doctor._groups import GroupState
from kaflite.doctor._model import Evidence, Finding
from kaflite.doctor._thresholds import Thresholds

__all__ = ["CHECKS", "client_findings", "group_findings"]

# the findings' names, in the order they are reported
CHECKS = ("vip-bootstrap", "metadata-storm", "rebalance-storm", "coordinator-flapping",
          "connection-fanout", "idle-connections")


def _subject(c: ClientState) -> str:
    source, client_id, host = c.key
    return f"client {client_id or '(none)'} @ {host}" + (" via proxy" if source == "proxy"
                                                       else "")


def vip_bootstrap(c: ClientState, t: Thresholds) -> Finding | None:
    if c.not_leader < t.vip_min_not_leader or c.stale_repeats < t.vip_min_stale_repeats:
        return None
    brokers = len({b for b, _ in c.refused})
    return Finding(
        "vip-bootstrap", _subject(c),
        f"{c.not_leader} NOT_LEADER_OR_FOLLOWER answers; {c.stale_repeats} times the "
        "client sent a partition back to the broker that had refused it, after asking for "
        "metadata: its connections do not reach the broker they are meant for. Every "
        "broker is advertised at one (load-balanced) address; advertise each broker's own "
        "address, or put kaflite proxy in front, not a round-robin VIP.",
        {"not_leader_or_follower": c.not_leader, "stale_repeats": c.stale_repeats,
         "refused_partition_broker_pairs": len(c.refused), "refusing_brokers": brokers,
         "metadata_requests": c.metadata},
        tuple(c.stale_evidence)[:t.evidence_records], client_id=c.key[1])


def metadata_storm(c: ClientState, t: Thresholds) -> Finding | None:
    if c.metadata_peak < t.metadata_storm_per_minute:
        return None
    reasons = ", ".join(f"{why}: {n}" for why, n in c.metadata_reasons.most_common(3))
    return Finding(
        "metadata-storm", _subject(c),
        f"{c.metadata_peak} Metadata requests within one minute ({reasons}): the client "
        "refreshes its metadata far more often than errors or metadata.max.age.ms need; "
        "look at what keeps failing for it, or at a client created per operation.",
        {"peak_per_minute": c.metadata_peak, "metadata_requests": c.metadata,
         **{f"reason:{why}": n for why, n in c.metadata_reasons.items()}},
        c.metadata_peak_records[:t.evidence_records], client_id=c.key[1])


def connection_fanout(c: ClientState, brokers: int, t: Thresholds) -> Finding | None:
    most = c.max_open_connections()
    limit = t.fanout_per_broker * max(brokers, 1) + t.fanout_slack
    if most <= limit:
        return None
    return Finding(
        "connection-fanout", _subject(c),
        f"{most} connections open at once to a cluster of {brokers} brokers (more than "
        f"{limit}): a client needs about one per broker; look for a client made per "
        "request or per thread under one client.id, or one that reconnects without "
        "closing.",
        {"max_open_connections": most, "brokers": brokers, "limit": limit,
         "connections_seen": len(c.connections)},
        client_id=c.key[1])


def idle_connections(c: ClientState, t: Thresholds) -> Finding | None:
    idle = c.idle_connections()
    if len(idle) < t.idle_min_connections:
        return None
    longest = max(c.last_seen - conn.last_seen for conn in idle)
    records = tuple(Evidence(conn.last_seen, conn.broker, conn.connection_id, c.key[1],
                             "(last request)", (), None, ()) for conn in idle)
    return Finding(
        "idle-connections", _subject(c),
        f"{len(idle)} connections sent nothing for {t.idle_after_s:.0f} s or more (up to "
        f"{longest:.0f} s) while the client kept working on others: connections opened "
        "and kept without use cost the brokers memory and file descriptors; close them, "
        "or let connections.max.idle.ms do it.",
        {"idle_connections": len(idle), "longest_idle_s": round(longest, 1),
         "connections_seen": len(c.connections)},
        records[:t.evidence_records], client_id=c.key[1])


def rebalance_storm(g: GroupState, t: Thresholds) -> Finding | None:
    count, events = g.rebalance_peak(t.rebalance_storm_window_s)
    if count < t.rebalance_storm_count:
        return None
    members = sorted({e.client_id or "(none)" for e in events})
    return Finding(
        "rebalance-storm", f"group {g.group}" + (" via proxy" if g.source == "proxy" else ""),
        f"{count} rebalances (generations {events[0].generation}..{events[-1].generation}) "
        f"within {t.rebalance_storm_window_s:.0f} s, joined by {', '.join(members[:5])}: "
        "members keep leaving and rejoining; check session.timeout.ms and "
        "max.poll.interval.ms against how long processing takes, and for crash loops.",
        {"rebalances": count, "window_s": t.rebalance_storm_window_s,
         "members": len(members)},
        tuple(e.record for e in events[-t.evidence_records:]), group=g.group)


def coordinator_flapping(g: GroupState, t: Thresholds) -> Finding | None:
    count, moves = g.flapping(t.coordinator_flap_window_s)
    if count < t.coordinator_flap_moves:
        return None
    path = " -> ".join([str(moves[0].from_broker), *(str(m.to_broker) for m in moves)])
    return Finding(
        "coordinator-flapping",
        f"group {g.group}" + (" via proxy" if g.source == "proxy" else ""),
        f"the group's coordinator moved {count} times within "
        f"{t.coordinator_flap_window_s:.0f} s, back and forth (brokers {path}): the "
        "leadership of its __consumer_offsets partition keeps bouncing; look for a broker "
        "that restarts in a loop or drops out of the ISR.",
        {"moves": count, "window_s": t.coordinator_flap_window_s},
        tuple(m.record for m in moves[-t.evidence_records:]), group=g.group)


def client_findings(c: ClientState, brokers: int, t: Thresholds) -> list[Finding]:
    found = [vip_bootstrap(c, t), metadata_storm(c, t), connection_fanout(c, brokers, t),
             idle_connections(c, t)]
    return [f for f in found if f is not None]


def group_findings(g: GroupState, t: Thresholds) -> list[Finding]:
    found = [rebalance_storm(g, t), coordinator_flapping(g, t)]
    return [f for f in found if f is not None]
