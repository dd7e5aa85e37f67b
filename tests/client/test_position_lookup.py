"""A partition assigned while the committed offsets of an earlier assignment are being
looked up gets its own lookup; it is not reset by auto.offset.reset.

Found by the 30-minute KIP-848 soak of kaflite's client (2026-11-30, seed 1848589100):
consumer-1 was assigned partitions 2 and 3, looked their committed offsets up while the
nemesis moved the group coordinator (a slow OffsetFetch), and was assigned partitions 0
and 1 meanwhile. When the lookup returned, partitions 0 and 1 needed a position too,
and went to auto.offset.reset=earliest: the member read partition 0 from offset 0 and
committed 500, 1000, ... over the group's 75763 (268 commits that went back)."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client.consumer import Consumer, TopicPartition
from kaflite.client.consumer import _consumer as consumer_module
from kaflite.client.consumer._types import OffsetAndMetadata

T = "queue"


class _Group:
    """The group's committed offsets; while the first lookup waits, the coordinator's
    new assignment arrives."""

    def __init__(self, consumer: Consumer[bytes, bytes]) -> None:
        self.consumer = consumer
        self.committed = {TopicPartition(T, p): 1000 + p for p in range(4)}
        self.looked_up: list[list[TopicPartition]] = []

    async def fetch_committed(self, tps: list[TopicPartition], timeout: float
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self.looked_up.append(sorted(tps))
        if len(self.looked_up) == 1:
            await asyncio.sleep(0)
            self.consumer._subs.set_assignment({TopicPartition(T, p) for p in range(4)})
        return {tp: OffsetAndMetadata(self.committed[tp], "", -1) for tp in tps}


def test_a_partition_assigned_during_the_lookup_gets_its_committed_offset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        consumer: Consumer[bytes, bytes] = Consumer(
            bootstrap_servers="127.0.0.1:1", group_id="g", auto_offset_reset="earliest")
        group = _Group(consumer)
        reset: list[TopicPartition] = []

        async def no_list_offsets(client: object, query: dict[TopicPartition, int],
                                  *args: object) -> dict[TopicPartition, None]:
            reset.extend(query)
            return dict.fromkeys(query)

        monkeypatch.setattr(consumer, "_group", group)
        monkeypatch.setattr(consumer_module, "list_offsets", no_list_offsets)
        consumer._subs.set_assignment({TopicPartition(T, 2), TopicPartition(T, 3)})
        await consumer._update_positions()
        await consumer._update_positions()
        assert reset == [], f"reset to earliest: {reset}"
        positions = {p: consumer._subs.state(TopicPartition(T, p)).position for p in range(4)}
        assert positions == {p: 1000 + p for p in range(4)}
        # the second lookup asked for the partitions assigned during the first
        assert {TopicPartition(T, 0), TopicPartition(T, 1)} <= set(group.looked_up[1])
    asyncio.run(asyncio.wait_for(main(), 30))
