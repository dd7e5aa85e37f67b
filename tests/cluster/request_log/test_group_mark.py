"""The request log's group mark: the group a request names and its generation or epoch."""

from __future__ import annotations

from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.request_log import NO_MARK, RequestRecord, build, group_mark, pending
from kaflite.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    MetadataRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)


def test_join_takes_the_generation_the_response_starts() -> None:
    assert group_mark(11, JoinGroupRequest(group_id="g"), JoinGroupResponse(generation_id=4)) \
        == ("g", 4)
    # a failed join starts none
    assert group_mark(11, JoinGroupRequest(group_id="g"),
                      JoinGroupResponse(error_code=27, generation_id=-1)) == ("g", None)


def test_the_others_carry_the_generation_or_epoch_the_member_is_in() -> None:
    assert group_mark(14, SyncGroupRequest(group_id="g", generation_id=4), None) == ("g", 4)
    assert group_mark(12, HeartbeatRequest(group_id="g", generation_id=5),
                      HeartbeatResponse()) == ("g", 5)
    assert group_mark(8, OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=6),
                      None) == ("g", 6)
    assert group_mark(68, ConsumerGroupHeartbeatRequest(group_id="g", member_epoch=2),
                      ConsumerGroupHeartbeatResponse(member_epoch=3)) == ("g", 3)
    # a commit outside a group (generation -1) carries none
    assert group_mark(8, OffsetCommitRequest(group_id="g"), None) == ("g", None)


def test_no_group_no_mark_and_the_record_keeps_it() -> None:
    assert group_mark(3, MetadataRequest(), None) is NO_MARK
    info = ConnectionRecord(1, 0, "10.0.0.1:5", client_id="c")
    mark = group_mark(14, SyncGroupRequest(group_id="g", generation_id=7), None)
    record = build(pending(info, 14, 5, 1.0, 0, [], mark=mark))
    back = RequestRecord.decode(record.encode()[1])
    assert (back.group, back.generation) == ("g", 7)
    # a record written before the fields existed reads with neither
    old = record.encode()[1].replace(b',"group":"g","generation":7', b"")
    assert (RequestRecord.decode(old).group, RequestRecord.decode(old).generation) == \
        (None, None)
