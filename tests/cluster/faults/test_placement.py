"""Where an injected error lands, message by message (no network).

Each case builds a real request, runs the plan/finish steps a connection runs
around its handler (with a stand-in handler), and checks the response as a
client would decode it: the error at Kafka's level, the handler spared the
faulted partitions, the rule consumed as counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kaflite.cluster._inject import Rule, finish_response, plan_request
from kaflite.protocol.messages import (
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ProduceRequest,
    ProduceResponse,
    Struct,
)
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import fetch_response as fr
from kaflite.protocol.messages import find_coordinator_response as fcr
from kaflite.protocol.messages import metadata_request as mq
from kaflite.protocol.messages import metadata_response as mr
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq
from kaflite.protocol.messages import offset_fetch_response as ofr
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import produce_response as pr

NOT_LEADER, LNA, NOT_COORDINATOR, ILLEGAL_GENERATION = 6, 5, 16, 22
UNKNOWN_MEMBER_ID, TOPIC_AUTH = 25, 29
TOPIC_ID = uuid.UUID(int=7)


def resolve(topic_id: uuid.UUID) -> str | None:
    return "t" if topic_id == TOPIC_ID else None


def run(rules: list[Rule], api_key: int, version: int, request: Struct,
        handler: Callable[[Any], Struct], client_id: str = "c", replica: bool = False,
        sessions: Any = None) -> tuple[Struct, bool]:
    """(the response as encoded and decoded at ``version``, whether the handler ran)."""
    plan = plan_request(rules, 0, client_id, replica, api_key, version, request, resolve)
    ran = False
    if plan is not None and plan.response is not None:
        response = plan.response
    else:
        ran = True
        response = handler(request)
        if plan is not None:
            response = finish_response(plan, rules, api_key, version, request, response,
                                       resolve, sessions)
    return type(response).decode(response.encode(version), version), ran


def produce_request(*partitions: int) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[pq.TopicProduceData(
        name="t", partition_data=[pq.PartitionProduceData(p, b"") for p in partitions])])


def produce_handler(seen: list[int]) -> Callable[[Any], Struct]:
    def handle(req: ProduceRequest) -> ProduceResponse:
        parts = [d.index for t in req.topic_data for d in t.partition_data]
        seen.extend(parts)
        return ProduceResponse(responses=[pr.TopicProduceResponse(name="t", partition_responses=[
            pr.PartitionProduceResponse(p, 0, 100, -1, 0) for p in parts])] if parts else [])
    return handle


def test_produce_partition_error_skips_the_append_of_that_partition() -> None:
    rules = [Rule("error", 0, error_code=NOT_LEADER, topic="t", partition=0)]
    appended: list[int] = []
    resp, ran = run(rules, 0, 9, produce_request(0, 1), produce_handler(appended))
    assert ran and appended == [1]
    by_index = {p.index: p for p in resp.responses[0].partition_responses}
    assert by_index[0].error_code == NOT_LEADER and by_index[0].base_offset == -1
    assert by_index[1].error_code == 0 and by_index[1].base_offset == 100
    assert rules == []  # count 1: consumed and gone


def test_produce_error_without_scope_hits_every_partition_and_counts_requests() -> None:
    rule = Rule("error", 0, error_code=LNA, remaining=2)
    rules = [rule]
    for _ in range(2):
        appended: list[int] = []
        resp, _ = run(rules, 0, 11, produce_request(0, 1, 2), produce_handler(appended))
        assert appended == []
        assert sorted(p.index for p in resp.responses[0].partition_responses) == [0, 1, 2]
        assert {p.error_code for p in resp.responses[0].partition_responses} == {LNA}
    assert rules == [] and rule.hits == 2
    resp, _ = run(rules, 0, 11, produce_request(0), produce_handler([]))
    assert resp.responses[0].partition_responses[0].error_code == 0


def test_heartbeat_error_is_top_level_and_the_handler_is_not_called() -> None:
    rules = [Rule("error", 12, error_code=ILLEGAL_GENERATION, group="g", remaining=None)]
    req = HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    resp, ran = run(rules, 12, 4, req, lambda r: pytest.fail("handler called"))
    assert not ran and resp.error_code == ILLEGAL_GENERATION
    other = HeartbeatRequest(group_id="other", generation_id=3, member_id="m")
    from kaflite.protocol.messages import HeartbeatResponse
    resp, ran = run(rules, 12, 4, other, lambda r: HeartbeatResponse(error_code=0))
    assert ran and resp.error_code == 0
    assert len(rules) == 1  # until removed


def test_join_group_error_has_kafkas_invalid_fields() -> None:
    rules = [Rule("error", 11, error_code=UNKNOWN_MEMBER_ID)]
    req = JoinGroupRequest(group_id="g", session_timeout_ms=10000, member_id="m",
                           protocol_type="consumer")
    resp, ran = run(rules, 11, 7, req, lambda r: pytest.fail("handler called"))
    assert not ran
    assert (resp.error_code, resp.generation_id, resp.members) == (UNKNOWN_MEMBER_ID, -1, [])


def metadata_response(*partition_counts: int) -> MetadataResponse:
    return MetadataResponse(brokers=[mr.MetadataResponseBroker(0, "h", 1)], topics=[
        mr.MetadataResponseTopic(0, name, topic_id=uuid.uuid4(), partitions=[
            mr.MetadataResponsePartition(0, p, 0, 1, [0], [0]) for p in range(n)])
        for name, n in zip(("t", "u"), partition_counts, strict=False)])


def test_metadata_acl_denial_is_a_topic_error_or_a_missing_topic() -> None:
    rules = [Rule("error", None, error_code=TOPIC_AUTH, topic="t", remaining=None)]
    named = MetadataRequest(topics=[mq.MetadataRequestTopic(name="t"),
                                    mq.MetadataRequestTopic(name="u")])
    asked: list[str] = []

    def handle(r: MetadataRequest) -> MetadataResponse:
        asked.extend(t.name for t in r.topics)  # a denied topic is not even auto-created
        full = metadata_response(3, 2)
        full.topics = [t for t in full.topics if t.name in asked]
        return full

    resp, _ = run(rules, 3, 12, named, handle)
    assert asked == ["u"]
    by_name = {t.name: t for t in resp.topics}
    t, u = by_name["t"], by_name["u"]
    assert (t.error_code, t.partitions, str(t.topic_id)) == (TOPIC_AUTH, [], str(uuid.UUID(int=0)))
    assert (u.error_code, len(u.partitions)) == (0, 2)
    # All topics: an unauthorized topic is simply not listed.
    resp, _ = run(rules, 3, 12, MetadataRequest(topics=None), lambda r: metadata_response(3, 2))
    assert [t.name for t in resp.topics] == ["u"]


def test_denied_topic_is_not_created() -> None:
    from kaflite.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
    from kaflite.protocol.messages import create_topics_request as ctq
    from kaflite.protocol.messages import create_topics_response as ctr

    rules = [Rule("error", None, error_code=TOPIC_AUTH, topic="t", remaining=None)]
    req = CreateTopicsRequest(topics=[ctq.CreatableTopic("t", 1, 1), ctq.CreatableTopic("u", 1, 1)],
                              timeout_ms=1000)
    created: list[str] = []

    def handle(r: CreateTopicsRequest) -> CreateTopicsResponse:
        created.extend(t.name for t in r.topics)
        return CreateTopicsResponse(topics=[ctr.CreatableTopicResult("u", error_code=0)])

    resp, _ = run(rules, 19, 5, req, handle)
    assert created == ["u"]
    assert {t.name: t.error_code for t in resp.topics} == {"t": TOPIC_AUTH, "u": 0}


def test_metadata_leader_not_available_is_a_partition_error() -> None:
    rules = [Rule("error", 3, error_code=LNA, topic="t", partition=1)]
    req = MetadataRequest(topics=[mq.MetadataRequestTopic(name="t")])
    resp, _ = run(rules, 3, 12, req, lambda r: metadata_response(3))
    parts = {p.partition_index: p for p in resp.topics[0].partitions}
    assert resp.topics[0].error_code == 0
    assert (parts[1].error_code, parts[1].leader_id) == (LNA, -1)
    assert parts[0].error_code == 0 and parts[0].leader_id == 0


def test_offset_commit_coordinator_error_is_per_partition_and_commits_nothing() -> None:
    rules = [Rule("error", 8, error_code=NOT_COORDINATOR, group="g")]
    req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m",
                              topics=[ocq.OffsetCommitRequestTopic("t", partitions=[
                                  ocq.OffsetCommitRequestPartition(0, 5),
                                  ocq.OffsetCommitRequestPartition(1, 6)])])
    committed: list[Any] = []

    def handle(r: OffsetCommitRequest) -> OffsetCommitResponse:
        committed.extend(r.topics)
        return OffsetCommitResponse(topics=[])

    resp, _ = run(rules, 8, 8, req, handle)
    assert committed == []
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
        (0, NOT_COORDINATOR), (1, NOT_COORDINATOR)]


def test_offset_fetch_coordinator_error_top_level_or_per_group() -> None:
    rules = [Rule("error", 9, error_code=NOT_COORDINATOR, remaining=2)]
    v7 = OffsetFetchRequest(group_id="g", topics=None)
    resp, ran = run(rules, 9, 7, v7, lambda r: pytest.fail("handler called"))
    assert not ran and resp.error_code == NOT_COORDINATOR
    v8 = OffsetFetchRequest(groups=[ofq.OffsetFetchRequestGroup("g", topics=None),
                                    ofq.OffsetFetchRequestGroup("h", topics=None)])
    rules[0].group = "h"
    resp, ran = run(rules, 9, 8, v8, lambda r: OffsetFetchResponse(groups=[
        ofr.OffsetFetchResponseGroup("g", []), ofr.OffsetFetchResponseGroup("h", [])]))
    assert ran and [(g.group_id, g.error_code) for g in resp.groups] == [
        ("g", 0), ("h", NOT_COORDINATOR)]
    assert rules == []


def test_find_coordinator_v4_error_is_per_key() -> None:
    rules = [Rule("error", 10, error_code=NOT_COORDINATOR, group="g")]
    req = FindCoordinatorRequest(key_type=0, coordinator_keys=["g", "h"])
    resp, _ = run(rules, 10, 4, req, lambda r: FindCoordinatorResponse(coordinators=[
        fcr.Coordinator("g", 1, "host", 9092), fcr.Coordinator("h", 2, "host", 9093)]))
    g, h = resp.coordinators
    assert (g.error_code, g.node_id, g.port) == (NOT_COORDINATOR, -1, -1)
    assert (h.error_code, h.node_id) == (0, 2)


def fetch_request(version: int, *partitions: int) -> FetchRequest:
    return FetchRequest(max_wait_ms=0, min_bytes=1, topics=[fq.FetchTopic(
        topic="t" if version < 13 else "", topic_id=TOPIC_ID if version >= 13 else uuid.UUID(int=0),
        partitions=[fq.FetchPartition(partition=p, fetch_offset=0) for p in partitions])])


@pytest.mark.parametrize("version", [11, 13])
def test_fetch_partition_error_rewrites_the_response(version: int) -> None:
    rules = [Rule("error", 1, error_code=NOT_LEADER, topic="t", partition=0)]

    def handle(r: FetchRequest) -> FetchResponse:
        return FetchResponse(responses=[fr.FetchableTopicResponse(
            topic="t" if version < 13 else "", topic_id=TOPIC_ID, partitions=[
                fr.PartitionData(p, 0, 10, 10, 0, records=b"") for p in (0, 1)])])

    resp, ran = run(rules, 1, version, fetch_request(version, 0, 1), handle)
    parts = {p.partition_index: p for p in resp.responses[0].partitions}
    assert ran
    assert (parts[0].error_code, parts[0].high_watermark) == (NOT_LEADER, -1)
    records = parts[0].records
    assert records is not None and len(records) == 0  # empty, not null: as Kafka sends it
    assert parts[1].error_code == 0 and parts[1].high_watermark == 10


def test_fetch_error_reaches_a_session_partition_the_response_left_out() -> None:
    rules = [Rule("error", 1, error_code=NOT_LEADER, topic="t", partition=3)]
    incremental = FetchRequest(max_wait_ms=0, session_id=9, session_epoch=2, topics=[])

    def sessions(session_id: int) -> list[tuple[str, Any, int]]:
        return [("t", TOPIC_ID, 3)] if session_id == 9 else []

    resp, _ = run(rules, 1, 13, incremental,
                  lambda r: FetchResponse(session_id=9, responses=[]), sessions=sessions)
    [topic] = resp.responses
    assert topic.topic_id == TOPIC_ID
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(3, NOT_LEADER)]
    assert rules == []


def test_replica_requests_are_spared_unless_asked() -> None:
    rules = [Rule("error", 1, error_code=NOT_LEADER, remaining=None)]
    plan = plan_request(rules, 0, "broker-1-fetcher-0", True, 1, 12, fetch_request(12, 0),
                        resolve)
    assert plan is None
    rules[0].include_replicas = True
    assert plan_request(rules, 0, "broker-1-fetcher-0", True, 1, 12, fetch_request(12, 0),
                        resolve) is not None


def test_scope_by_client_broker_and_api() -> None:
    rules = [Rule("error", 0, error_code=NOT_LEADER, client_id="a", broker=0)]
    assert plan_request(rules, 0, "b", False, 0, 9, produce_request(0), resolve) is None
    assert plan_request(rules, 1, "a", False, 0, 9, produce_request(0), resolve) is None
    assert plan_request(rules, 0, "a", False, 3, 9, MetadataRequest(topics=None),
                        resolve) is None
    plan = plan_request(rules, 0, "a", False, 0, 9, produce_request(0), resolve)
    assert plan is not None and plan.stripped


def test_delay_drop_and_throttle_plans() -> None:
    rules = [Rule("delay", 1, delay_ms=50, remaining=None),
             Rule("throttle", None, delay_ms=200, remaining=1),
             Rule("drop", 0, remaining=1, topic="x")]
    plan = plan_request(rules, 0, "c", False, 1, 12, fetch_request(12, 0), resolve)
    assert plan is not None and (plan.delay_ms, plan.throttle_ms, plan.drop) == (50, 200, False)
    plan = plan_request(rules, 0, "c", False, 0, 9, produce_request(0), resolve)
    assert plan is not None and not plan.drop  # topic t, not x
    assert [r.kind for r in rules] == ["delay", "drop"]


def test_rule_validation() -> None:
    with pytest.raises(ValueError):
        Rule("explode")
    with pytest.raises(ValueError):
        Rule("error", 0)  # no error code
    with pytest.raises(ValueError):
        Rule("error", 0, error_code=6, partition=1)  # partition without topic
    with pytest.raises(ValueError):
        Rule("error", 0, error_code=6, level="somewhere")
