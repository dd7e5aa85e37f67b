"""What the tests of kaflite's KIP-848 member share (``test_kip848_group.py``,
``test_kip848_recovery.py``): the consumer's options, its membership manager, and a
spy on the heartbeats it builds."""

from __future__ import annotations

from typing import Any

import pytest

from kaflite.client import Consumer
from kaflite.client.consumer._membership import ConsumerMembership
from kaflite.cluster import Cluster
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest


def member_opts(cluster: Cluster, group: str, **extra: Any) -> dict[str, Any]:
    """A ``group.protocol=consumer`` member of ``group`` reading from the start."""
    opts: dict[str, Any] = dict(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                group_protocol="consumer", auto_offset_reset="earliest",
                                retry_backoff_ms=50)
    opts.update(extra)
    return opts


def membership(c: Consumer) -> ConsumerMembership:
    assert isinstance(c._group, ConsumerMembership)
    return c._group


def spy_on(group_member: ConsumerMembership, sent: list[ConsumerGroupHeartbeatRequest],
           monkeypatch: pytest.MonkeyPatch) -> None:
    """Record every ConsumerGroupHeartbeat the member builds."""
    build = group_member._build

    def spy(version: int) -> Any:
        req, fields = build(version)
        sent.append(req)
        return req, fields

    monkeypatch.setattr(group_member, "_build", spy)
