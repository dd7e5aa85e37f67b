"""The control-plane pipeline's driver side, without Spark: micro-batches of request log
values in, the doctor's findings out (each reported once), the records written for them,
and the offsets a checkpoint had committed (what a restarted query rebuilds up to)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from kaflite.pipelines.control_plane import (
    CLIENT_ID,
    ControlPlane,
    committed_offsets,
    finding_record,
)
from tests.doctor._scenario import METADATA, PRODUCE, Scenario

NOT_LEADER = {"NOT_LEADER_OR_FOLLOWER": 1}


def vip(s: Scenario, rounds: int, client: str = "vip") -> None:
    """A producer whose connections each land on a broker that does not lead what it
    sends there, refreshing metadata after each round (as in test_analyzer)."""
    s.add(METADATA, client=client, broker=1, conn=1, topics=("orders",), dt=0.1)
    for _ in range(rounds):
        for p, landed_on in ((0, 2), (1, 0), (2, 1)):
            s.add(PRODUCE, client=client, broker=landed_on, conn=2 + p,
                  partitions=(f"orders-{p}",), errors=NOT_LEADER, roles=("other",), dt=0.05)
        s.add(METADATA, client=client, broker=1, conn=1, topics=("orders",), dt=0.1)


def values(s: Scenario, seed: int = 1) -> list[bytes | None]:
    """The records as the log's values, out of order as partitions interleave them."""
    out: list[bytes | None] = [r.encode()[1] for r in s.records]
    random.Random(seed).shuffle(out)
    return out


def test_findings_accumulate_over_batches_and_each_is_new_once() -> None:
    plane = ControlPlane()
    first, second = Scenario(), Scenario()
    vip(first, 3)                     # 9 refusals: below the threshold of 20
    second.at(60)
    vip(second, 8)
    assert plane.feed(values(first)) == []
    batch_two = [*values(second), None, b"not json", b"[1, 2]"]
    found = plane.feed(batch_two)
    assert [(f.name, f.subject) for f in found] == [("vip-bootstrap", "client vip @ 10.0.0.1")]
    # the count covers both batches: the analyzer is the query's, not the batch's
    assert found[0].counts["not_leader_or_follower"] == 33
    assert plane.new(found) == found
    assert plane.new(plane.feed([])) == []
    assert (plane.batches, plane.values) == (3, len(first.records) + len(batch_two))


def test_the_pipelines_and_the_doctors_own_clients_are_left_out() -> None:
    plane = ControlPlane()
    s = Scenario()
    vip(s, 10, client=CLIENT_ID)
    vip(s, 10, client="kaflite-doctor")
    assert plane.feed(values(s)) == []
    assert plane.analyzer.report().clients == ()


def test_a_finding_as_the_record_written() -> None:
    plane = ControlPlane()
    s = Scenario()
    vip(s, 10)
    [finding] = plane.feed(values(s))
    [(key, value)] = plane.records([finding], batch=4, now_ms=1_700_000_123_000)
    assert key == "client vip @ 10.0.0.1"
    record = json.loads(value)
    assert record["report_time"] == 1_700_000_123_000 and record["batch"] == 4
    assert record["log_time"] == plane.analyzer.last
    assert record["name"] == "vip-bootstrap" and record["client_id"] == "vip"
    assert record["counts"]["not_leader_or_follower"] == 30 and record["records"]
    assert (key, value) == finding_record(finding, 1_700_000_123_000, plane.analyzer.last, 4)


def test_committed_offsets_are_those_of_the_last_committed_batch(tmp_path: Path) -> None:
    assert committed_offsets(tmp_path) is None          # a new checkpoint
    offsets, commits = tmp_path / "offsets", tmp_path / "commits"
    offsets.mkdir()
    commits.mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'
    for batch, ends in ((0, {"0": 10, "1": 4}), (1, {"0": 25, "1": 9}), (2, {"0": 30, "1": 9})):
        (offsets / str(batch)).write_text(
            f"v1\n{meta}\n{json.dumps({'__kaflite_requests': ends})}")
    assert committed_offsets(tmp_path) is None          # planned, none committed yet
    for batch in (0, 1):                                # batch 2 planned, not committed
        (commits / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (commits / ".1.crc").write_text("")
    assert committed_offsets(tmp_path) == {"__kaflite_requests": {"0": 25, "1": 9}}
