"""Members the coordinator removed: did each of them learn it?

A group coordinator removes a member without its asking when its session expires,
when it does not finish a rebalance in time, or when it is fenced (the history's
``Removed`` ops, from the coordinators' own log). From then on the partitions it
held belong to others, or to nobody until the next assignment. The member must let
them go (``lost``, or ``revoke`` where its library has no such callback) once an
answer tells it so: its next heartbeat, commit or join gets UNKNOWN_MEMBER_ID or
FENCED_MEMBER_EPOCH. A member that goes on polling records of a partition, or
committing it, long after it was removed, has not been told: a **silent expiry**,
the fault where two members fetched and committed the same partitions for minutes.

"Long after" is ``TOLD_WITHIN_S`` from the removal, or from the end of the member's
own cut or stall if the removal came inside one (it cannot hear anything before).
The member is matched by its consumer's ``client.id``: each consumer a process
opens has its own (``process.n``), so a removal of the consumer a process had
before does not count against the one it has now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kaflite.verify.history import Removed

__all__ = ["TOLD_WITHIN_S", "Removals"]

TOLD_WITHIN_S = 15.0            # 2.5 times the checker's session timeouts (6 s)
GroupKey = tuple[str, str, int]


@dataclass
class _Watch:
    removal: Removed
    deadline: float             # acting on the partition after this is a silent expiry
    reported: bool = False


class Removals:
    """Fed the ownership replay's events in time order; ``findings`` and ``stats`` at
    the end."""

    def __init__(self, absent: dict[str, list[tuple[float, float]]]) -> None:
        self.absent = absent                            # process -> cut/stall windows
        self.watches: dict[tuple[str, GroupKey], _Watch] = {}
        self.removed = 0
        self.holding = 0                                # removals of a member with partitions
        self.told_ms: list[int] = []
        self.silent: list[tuple[GroupKey, str, Removed, str, float]] = []

    def removal(self, op: Removed, held: Sequence[tuple[str, GroupKey]],
                client_of: dict[str, str | None]) -> None:
        """``op`` happened while ``held`` (process, partition) pairs had holders."""
        self.removed += 1
        start = op.time
        for w0, w1 in self.absent.get(op.process, ()):
            if w0 <= op.time <= w1:
                start = max(start, w1)
        mine = [(p, key) for p, key in held
                if p == op.process and key[0] == op.group and client_of.get(p) == op.client]
        if mine:
            self.holding += 1
        for p, key in mine:
            self.watches[(p, key)] = _Watch(op, start + TOLD_WITHIN_S)

    def released(self, process: str, key: GroupKey, t: float) -> None:
        watch = self.watches.pop((process, key), None)
        if watch is not None:
            self.told_ms.append(round((t - watch.removal.time) * 1000))

    def acted(self, process: str, key: GroupKey, t: float, what: str) -> None:
        watch = self.watches.get((process, key))
        if watch is None or watch.reported or t <= watch.deadline:
            return
        watch.reported = True
        self.silent.append((key, process, watch.removal, what, t))

    def stats(self) -> dict[str, int]:
        if not self.removed:
            return {}
        out = {"members removed": self.removed, "removed holding partitions": self.holding}
        if self.told_ms:
            out["longest until told (ms)"] = max(self.told_ms)
        return out

    def findings(self) -> list[tuple[tuple[object, ...], dict[str, object]]]:
        """(key, example) of each partition a removed member went on using untold."""
        out: list[tuple[tuple[object, ...], dict[str, object]]] = []
        for key, process, r, what, t in self.silent:
            group, topic, part = key
            out.append(((key, process, r.member_id), {
                "group": group, "topic": topic, "partition": part, "member": process,
                "client": r.client, "member_id": r.member_id, "protocol": r.protocol,
                "removed_at": round(r.time, 3), "cause": r.cause,
                "then": f"{what} at {t:.3f}"}))
        return out
