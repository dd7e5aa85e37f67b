"""A share group's partitions for the console (KIP-932): per share-partition its start
offset (SPSO) and lag, and, on a kaflite cluster, its in-flight records.

The start offset and lag come from DescribeShareGroupOffsets, as ``kaflite groups
describe`` shows them; that is all Kafka tells a tool. The in-flight window past the
start offset (each record acquired by a member, available, acknowledged or archived,
and how many times it was delivered) lives only on the partition's leader: kaflite's
embedded backend asks the leaders (``Backend.share_in_flight``); against any other
Kafka the answer says plainly that it cannot be shown.
"""

from __future__ import annotations

from kaflite.console.backend import ClientBackend
from kaflite.console.groups import described_or_404
from kaflite.console.web import ApiError, Json

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "NOT_IN_KAFKA", "share_in_flight"]

DEFAULT_LIMIT = 50     # in-flight records listed per partition (the counts cover them all)
MAX_LIMIT = 1000

NOT_IN_KAFKA = ("Kafka has no API that shows a share-partition's in-flight records: "
                "only its start offset (SPSO) and lag are known here "
                "(DescribeShareGroupOffsets). The records acquired, available, "
                "acknowledged or archived, and their delivery counts, show on a kaflite "
                "cluster (kaflite up).")


async def share_in_flight(backend: ClientBackend, group: str, limit: int) -> Json:
    """``GET /api/groups/{group}/share-partitions``: the group's members, and per
    partition its start offset, lag, the members assigned to it and (``in_flight``) the
    leader's in-flight window with its first ``limit`` records, or None when the leader
    holds no state for the group there."""
    described = await described_or_404(backend, group)
    share = described.share
    if share is None:
        if described.desc is None or (described.desc.state == "Dead"
                                      and not described.desc.members):
            raise ApiError(404, f"no group {group!r}")
        raise ApiError(400, f"group {group!r} is not a share group")
    g = share.group
    clients = {m.member_id: m.client_id for m in g.members}
    assigned: dict[tuple[str, int], list[str]] = {}
    for m in g.members:
        for tp in m.assignment.topic_partitions:
            for p in tp.partitions:
                assigned.setdefault((tp.topic_name, p), []).append(m.member_id)
    starts = {(str(r["topic"]), _int(r["partition"])): r for r in described.offsets}
    keys = sorted(set(starts) | set(assigned))
    found = await backend.share_in_flight(group, keys, limit)
    rows: list[Json] = []
    for key in keys:
        r = starts.get(key, {})
        row: Json = {"topic": key[0], "partition": key[1],
                     "start_offset": r.get("start_offset"), "lag": r.get("lag"),
                     "members": sorted(assigned.get(key, [])), "in_flight": None,
                     "error": None}
        snap = None if found is None else found.get(key)
        if snap is not None and "error" in snap:
            row["error"] = snap["error"]
        elif snap is not None:
            row["in_flight"] = _with_clients(snap, clients)
        rows.append(row)
    return {"group_id": g.group_id, "state": g.group_state, "limit": limit,
            "in_flight_shown": found is not None,
            "note": None if found is not None else NOT_IN_KAFKA,
            "members": [{"member_id": m.member_id, "client_id": m.client_id,
                         "host": m.client_host} for m in g.members],
            "partitions": rows}


def _with_clients(snap: Json, clients: dict[str, str]) -> Json:
    """The snapshot with each holder's client id beside its member id."""
    records = snap.get("records")
    if isinstance(records, list):
        for rec in records:
            if isinstance(rec, dict):
                member = rec.get("member_id")
                rec["client_id"] = clients.get(member) if isinstance(member, str) else None
    return snap


def _int(value: object) -> int:
    if isinstance(value, int):
        return value
    raise ValueError(f"not a partition number: {value!r}")
