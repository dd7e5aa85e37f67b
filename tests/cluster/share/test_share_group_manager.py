"""The share-group coordinator on a fake clock: epochs, the simple assignor, sessions, the
records it writes and a load from them."""

from __future__ import annotations

import asyncio
import uuid

from kaflite.cluster.groups._consumer import TopicView
from kaflite.cluster.groups._consumer_group import TopicMeta
from kaflite.cluster.groups._records import split_version
from kaflite.cluster.groups._share import ShareGroupManager
from kaflite.cluster.groups._share_group import ShareGroup, simple_assign
from kaflite.cluster.groups._share_records import decode_share_record, replay_share
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import ShareConfig
from kaflite.protocol import errors
from kaflite.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"a": TopicMeta(T1, "a", 2), "b": TopicMeta(T2, "b", 3)}
Record = tuple[bytes, bytes | None]


def test_simple_assignor_spreads_members_and_shares_partitions() -> None:
    few = simple_assign({"m1": frozenset({T1}), "m2": frozenset({T1})}, {T1: 4})
    assert few == {"m1": {T1: frozenset({0, 2})}, "m2": {T1: frozenset({1, 3})}}
    many = simple_assign({f"m{i}": frozenset({T1}) for i in range(4)}, {T1: 2})
    assert [many[f"m{i}"][T1] for i in range(4)] == [frozenset({p}) for p in (0, 1, 0, 1)]
    mixed = simple_assign({"m1": frozenset({T1, T2}), "m2": frozenset({T2})}, {T1: 1, T2: 2})
    assert mixed == {"m1": {T1: frozenset({0}), T2: frozenset({0})},
                     "m2": {T2: frozenset({1})}}


class Harness:
    def __init__(self) -> None:
        self.timer = ManualTimer()
        self.written: list[Record] = []
        self.groups: dict[str, ShareGroup] = {}
        self.manager = ShareGroupManager(
            self.groups, lambda gid: gid == "classic", self.timer, ShareConfig(),
            TopicView(TOPICS.get, lambda: list(TOPICS), lambda t: None), self.write)

    def write(self, records: list[Record]) -> asyncio.Future[int]:
        self.written += records
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        fut.set_result(0)
        return fut

    async def hb(self, member: str, epoch: int, topics: list[str] | None = None,
                 group: str = "g") -> ShareGroupHeartbeatResponse:
        return await self.manager.heartbeat("client", "/127.0.0.1", ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch,
            subscribed_topic_names=topics))


def test_heartbeats_epochs_sessions_and_reload() -> None:
    async def main() -> None:
        h = Harness()
        one = await h.hb("m1", 0, ["a"])
        assert (one.error_code, one.member_epoch) == (0, 1)
        assert one.assignment is not None and \
            one.assignment.topic_partitions[0].partitions == [0, 1]
        two = await h.hb("m2", 0, ["a", "b"])
        assert two.member_epoch == 2
        again = await h.hb("m1", 1)
        assert again.member_epoch == 2 and again.assignment is not None   # it changed
        assert (await h.hb("m1", 2)).assignment is None                      # it did not
        assert (await h.hb("m1", 9)).error_code == errors.FencedMemberEpochError.code
        assert (await h.hb("x", 0, ["a"], group="classic")).error_code == \
            errors.GroupIdNotFoundError.code
        # m2 goes silent: its session (45 s) fences it and the epoch moves on.
        for _ in range(10):
            h.timer.advance(5000)
            assert (await h.hb("m1", h.groups["g"].members["m1"].member_epoch)).error_code == 0
        assert set(h.groups["g"].members) == {"m1"} and h.groups["g"].group_epoch == 3
        # What was written loads back into the same group.
        loaded: dict[str, ShareGroup] = {}
        for key, value in h.written:
            version, reader = split_version(key)
            replay_share(loaded, decode_share_record(version, reader, value))
        g, back = h.groups["g"], loaded["g"]
        assert back.group_epoch == g.group_epoch
        assert {m: (x.member_epoch, x.subscribed_topic_names, dict(x.assigned))
                for m, x in back.members.items()} == \
            {m: (x.member_epoch, x.subscribed_topic_names, dict(x.assigned))
             for m, x in g.members.items()}
        assert back.initialized == {T1: {0, 1}, T2: {0, 1, 2}}
        # Leaving, then deleting the empty group, tombstones it.
        assert (await h.hb("m1", -1)).member_epoch == -1
        assert await h.manager.delete("g") == 0
        for key, value in h.written[-2:]:
            version, reader = split_version(key)
            replay_share(loaded, decode_share_record(version, reader, value))
        assert "g" not in loaded
    asyncio.run(main())
