"""The share workload's members acknowledge each delivery of a poll once.

A share consumer refuses to acknowledge a record whose acknowledgement went already
(with a poll or a commit: Java's ``IllegalStateException``, kaflite's
``IllegalStateError``); before that, a second acknowledgement replaces the first. The
member acknowledges every record it was handed exactly once, then commits, so the
history's ``Ack`` of each delivery is the one acknowledgement its library sent.
"""

from __future__ import annotations

import random
from typing import Any, cast

from kaflite.client.consumer import IllegalStateError
from kaflite.verify._share_member import _acknowledge, _ShareAcks
from kaflite.verify._shared import Shared
from kaflite.verify.clients._base import TP, Delivery
from kaflite.verify.history import History, Note


class StrictMember:
    """A share consumer that refuses an acknowledgement of a delivery already
    acknowledged (stricter than Kafka's, which takes the later one until it is sent)."""

    def __init__(self) -> None:
        self.acked: dict[tuple[TP, int], str] = {}
        self.commits: list[bool] = []

    def acknowledge(self, tp: TP, offset: int, type_: str) -> None:
        if (tp, offset) in self.acked:
            raise IllegalStateError(f"{tp} offset {offset} acknowledged twice")
        self.acked[(tp, offset)] = type_

    def commit(self, asynchronous: bool) -> None:
        self.commits.append(asynchronous)


def test_each_delivery_of_a_poll_is_acknowledged_once_then_committed() -> None:
    history = History()
    shared = Shared(history, cast(Any, None), "", seed=1)
    acks = _ShareAcks(shared, "m0", "g", "m0.0")
    member = StrictMember()
    held: list[Delivery] = [("t", p, o, 97 * o + p, 1, None) for p in (0, 1) for o in range(5)]
    _acknowledge(shared, cast(Any, member), acks, "m0", held, random.Random(7))
    assert not [op for op in history if isinstance(op, Note)]   # nothing refused
    assert set(member.acked) == {(("t", p), o) for p in (0, 1) for o in range(5)}
    assert member.commits == [False]
    # what the history will say was sent: each delivery once, with the type sent
    assert {(t, p, o): kind for (t, p, o), (kind, _, _) in acks.pending.items()} == \
        {(tp[0], tp[1], o): kind for (tp, o), kind in member.acked.items()}
