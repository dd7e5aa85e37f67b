"""What the harness asks a running cluster, through kaflite's own admin client.

Kept apart from the launchers: these are the only places where the harness speaks the
protocol, and each call is bounded, so a broker that never answers fails a start
rather than hanging it. ``run_blocking`` runs one of them from a synchronous caller,
on a loop of its own in a short-lived thread, so it works whether or not the caller
already runs an event loop (a fixture, a benchmark, an async test).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from kaflite._loop import run
from kaflite.client.admin import Admin
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
)
from kaflite.protocol.messages import alter_partition_reassignments_request as apr
from kaflite.protocol.messages import elect_leaders_request as elq

__all__ = ["brokers_seen", "move_leader_by_election", "partition_states", "run_blocking"]

T = TypeVar("T")
PROBE_TIMEOUT_S = 5.0
PREFERRED_ELECTION = 0


def run_blocking(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run ``coro`` to its end on a fresh loop in another thread, for at most
    ``timeout`` seconds."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kaflite-probe") as pool:
        return pool.submit(run, asyncio.wait_for(coro, timeout)).result(timeout + 5)


def _admin(bootstrap: str) -> Admin:
    return Admin(bootstrap_servers=bootstrap, client_id="kaflite-testing-probe",
                 request_timeout_ms=int(PROBE_TIMEOUT_S * 1000), retry_backoff_ms=100)


async def brokers_seen(bootstrap: str) -> set[int] | None:
    """The broker ids that one Metadata response from ``bootstrap`` lists, or None when
    that broker does not answer yet. A KRaft broker lists only unfenced brokers, so a
    node appears once the controller has let it serve."""
    admin = _admin(bootstrap)
    try:
        await asyncio.wait_for(admin.start(), PROBE_TIMEOUT_S)
        return set(admin.pool.brokers)
    except (TimeoutError, OSError, errors.KafkaError):
        return None
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def _leader(admin: Admin, topic: str, partition: int) -> tuple[int, list[int], list[int]]:
    await admin.metadata.refresh("move leader")
    meta = (await admin.describe_topics([topic]))[topic].partitions[partition]
    return meta.leader, list(meta.replicas), list(meta.isr)


async def move_leader_by_election(bootstrap: str, topic: str, partition: int,
                                  to: int | None, timeout: float) -> int:
    """Make ``to`` (or another in-sync replica) the leader on a cluster that has no
    hook for it: reorder the replica list so that ``to`` comes first
    (AlterPartitionReassignments with the same set, so no data moves), then ask for a
    preferred-leader election (ElectLeaders), as ``kafka-leader-election`` does."""
    admin = _admin(bootstrap)
    try:
        await admin.start()
        leader, replicas, isr = await _leader(admin, topic, partition)
        target = to if to is not None else next((r for r in isr if r != leader), None)
        if target is None or target not in isr:
            raise ValueError(f"{topic}-{partition}: {target} is not an in-sync replica {isr}")
        if target == leader:
            return leader
        order = [target, *(r for r in replicas if r != target)]
        controller = await admin._controller()
        resp = await admin._request(controller, AlterPartitionReassignmentsRequest(
            timeout_ms=int(timeout * 1000), topics=[apr.ReassignableTopic(
                name=topic, partitions=[apr.ReassignablePartition(
                    partition_index=partition, replicas=order)])]))
        if resp.error_code:
            raise errors.error_for_code(resp.error_code, f"reassign: {resp.error_message}")
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    raise errors.error_for_code(p.error_code, f"reassign: {p.error_message}")
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            elected = await admin._request(controller, ElectLeadersRequest(
                election_type=PREFERRED_ELECTION, timeout_ms=int(timeout * 1000),
                topic_partitions=[elq.TopicPartitions(topic=topic, partitions=[partition])]))
            codes = [p.error_code for r in elected.replica_election_results
                     for p in r.partition_result]
            leader, _, _ = await _leader(admin, topic, partition)
            if leader == target:
                return leader
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{topic}-{partition}: leader still {leader}, not {target} "
                                   f"(ElectLeaders answered {codes})")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def partition_states(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Each partition of ``topic`` as one Metadata answer has it: leader, leader epoch,
    replicas and ISR, in partition order (empty if the topic is unknown)."""
    admin = _admin(bootstrap)
    try:
        await admin.start()
        try:
            meta = (await admin.describe_topics([topic]))[topic]
        except errors.UnknownTopicOrPartitionError:
            return []
        return [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                 "replicas": list(p.replicas), "isr": list(p.isr)}
                for p in sorted(meta.partitions, key=lambda p: p.partition)]
    finally:
        await admin.close()
