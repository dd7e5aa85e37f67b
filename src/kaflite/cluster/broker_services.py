"""What a broker process serves to the controller process (``RemoteController.services``).

Each service takes the call's JSON arguments and returns a JSON value (or an
awaitable of one). With them the controller process aggregates the connection
registry (``connections``) and the Prometheus metrics (``metrics``), forwards fault injection (``set_rules``, ``drop``,
``forget_member``, ``delete_records``, the share-group faults), reads what the broker's metadata replica
holds (``describe``) and a share group's in-flight records (``share_in_flight``, for the
console), and asks for a controlled shutdown (``shutdown``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster._inject import Rule
from kaflite.cluster.faults import FaultUnavailable, RuleBook, delete_records_of
from kaflite.cluster.metadata_image import Json
from kaflite.cluster.observe_wire import record_to_json

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.controller_client import RemoteController

__all__ = ["rule_from_dict", "services"]


def rule_from_dict(d: Json) -> Rule:
    """A rule as ``Rule.to_dict`` wrote it."""
    return Rule(str(d["kind"]), d["api_key"], error_code=int(d["error_code"] or 0),
                delay_ms=int(d["delay_ms"] or 0), remaining=d["remaining"],
                broker=d["broker"], topic=d["topic"], partition=d["partition"],
                group=d["group"], client_id=d["client_id"], level=d["level"],
                include_replicas=bool(d["include_replicas"]), id=int(d["id"]),
                hits=int(d["hits"]), created=float(d["created"]))


def rule_book(ctl: RemoteController) -> RuleBook:
    """The broker process's copy of the cluster's rules; hits are reported back."""
    book = RuleBook()
    book.on_hit = lambda ids: ctl.send({"op": "rule_hit", "ids": ids})
    return book


def services(broker: Broker, stop: asyncio.Event) -> dict[str, Callable[[Json], object]]:
    async def shutdown(args: Json) -> None:
        await broker.stop()
        stop.set()

    def describe(args: Json) -> Json:
        c = broker.controller
        return {
            "cluster_id": c.cluster_id,
            "brokers": {str(b.node_id): {"alive": b.alive, "isolated": b.fenced_replication}
                        for b in c.brokers.values()},
            "topics": {t.name: {"topic_id": str(t.topic_id), "configs": t.configs,
                                "partitions": [p.to_json() for p in t.partitions]}
                       for t in c.topics.values()},
            "hosted": {f"{t}-{i}": {"leader": p.is_leader, "log_end_offset": p.log_end_offset,
                                    "high_watermark": p.high_watermark,
                                    "retention_ms": p.log.config.retention_ms}
                       for (t, i), p in broker.partitions.items()},
            "acls": len(c.acls), "scram_users": sorted(c.scram),
            "quotas": c.client_quotas.to_json(),
        }

    def connections(args: Json) -> list[Json]:
        infos = [c.info for c in list(broker.connections.values()) if not c.closed]
        return [record_to_json(i) for i in [*infos, *broker.closed_connections]]

    def set_rules(args: Json) -> None:
        if broker.faults is not None:
            broker.faults.replace([rule_from_dict(d) for d in args["rules"]])

    def drop(args: Json) -> int:
        """Close client connections (``client_id``), or the replication ones of ``node``."""
        n = 0
        for conn in list(broker.connections.values()):
            if _drops(conn.info.replica_of, conn.info.client_id, broker.node_id, args):
                conn.abort()
                n += 1
        return n

    def forget_member(args: Json) -> bool:
        groups = broker.groups
        return groups is not None and groups.forget_member(str(args["group"]),
                                                           str(args["member"]))

    def delete_records(args: Json) -> int:
        p = broker.partitions.get((str(args["topic"]), int(args["partition"])))
        if p is None:
            raise FaultUnavailable(f"{args['topic']}-{args['partition']} has no leader")
        return delete_records_of(p, int(args["before"]))

    async def expire_share_locks(args: Json) -> int:
        member = args.get("member")
        return 0 if broker.share is None else await broker.share.expire_locks_written(
            str(args["group"]), str(args["topic"]), int(args["partition"]),
            None if member is None else str(member))

    async def share_in_flight(args: Json) -> Json | None:
        """A share group's in-flight records on a partition led here (the console)."""
        p = broker.partitions.get((str(args["topic"]), int(args["partition"])))
        if p is None or not p.is_leader or broker.share is None:
            raise FaultUnavailable(f"{args['topic']}-{args['partition']} is not led here")
        found = await broker.share.snapshot(str(args["group"]), p, int(args["limit"]))
        return None if found is None else found.to_json()

    def bump_share_state_epoch(args: Json) -> bool:
        coordinator = broker.share_coordinator
        topic = broker.controller.topics.get(str(args["topic"]))
        if coordinator is None or topic is None:
            raise FaultUnavailable(f"no share state for {args['topic']}")
        return coordinator.bump_state_epoch(str(args["group"]), topic.topic_id,
                                            int(args["partition"]))

    def metrics(args: Json) -> str:
        from kaflite.cluster.metrics import broker_text

        return broker_text(broker)

    return {"shutdown": shutdown, "describe": describe, "connections": connections,
            "metrics": metrics, "ping": lambda args: None,
            "set_rules": set_rules, "drop": drop, "forget_member": forget_member,
            "delete_records": delete_records, "expire_share_locks": expire_share_locks,
            "bump_share_state_epoch": bump_share_state_epoch,
            "share_in_flight": share_in_flight}


def _drops(replica_id: int | None, client_id: str | None, me: int, args: Json) -> bool:
    node = args.get("replicas_of")
    if node is not None:     # replication connections to or from ``node``
        return replica_id is not None and node in (me, replica_id)
    if replica_id is not None and not args.get("include_replicas"):
        return False
    return args.get("client_id") is None or client_id == args["client_id"]
