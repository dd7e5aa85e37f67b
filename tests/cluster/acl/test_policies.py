"""Every API a broker serves has an authorization policy in the request gate, or is
named in ``UNGATED`` with the reason it needs none there. An API with neither would be
served to any user: DescribeClientQuotas and AlterClientQuotas were, until this test
(any user could lift their own quotas, or throttle everyone else)."""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.cluster.acl._gate import POLICIES, UNGATED
from kaflite.protocol.messages import REGISTRY


def test_every_served_api_has_a_policy_or_a_reason() -> None:
    async def served() -> set[int]:
        async with Cluster(brokers=1) as cluster:
            return set(cluster.broker(0).api_versions())
    keys = asyncio.run(asyncio.wait_for(served(), 30))
    assert not set(POLICIES) & set(UNGATED)
    open_to_all = sorted(REGISTRY[k].name for k in keys - set(POLICIES) - set(UNGATED))
    assert open_to_all == []
    assert set(UNGATED) <= keys      # a reason for an API not served is stale
