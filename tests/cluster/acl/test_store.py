"""ACL requests with bad input, and ACLs across a restart (one authorizing broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from kaflite.client import Admin
from kaflite.client.sync import Admin as SyncAdmin
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kaflite.protocol.messages import create_acls_request as cq
from kaflite.protocol.messages import delete_acls_request as dq
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

T = TypeVar("T")
CONFIG = {"authorizer.class.name": "kaflite", "super.users": "User:ANONYMOUS"}
INVALID = errors.InvalidRequestError.code
GOOD = AclBinding(ResourceType.TOPIC, "kept", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, AclPermissionType.ALLOW)


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 60)
    return asyncio.run(bounded())


def creation(rt: int = 2, name: str = "t", pattern: int = 3, principal: str = "User:bob",
             host: str = "*", op: int = 3, perm: int = 3) -> cq.AclCreation:
    return cq.AclCreation(rt, name, pattern, principal, host, op, perm)


def test_bad_input_gets_invalid_request_and_loses_nothing(tmp_path: Path) -> None:
    async def go(cluster: Cluster) -> None:
        async with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            await admin.create_acls([GOOD])
            node = await admin._controller()
            bad = [creation(rt=99), creation(rt=1), creation(pattern=2), creation(pattern=77),
                   creation(op=1), creation(op=50), creation(perm=1), creation(perm=9),
                   creation(name=""), creation(name="*", pattern=4), creation(rt=4),
                   creation(principal=""), creation(principal="bob"),
                   creation(principal="User:"), creation(host="")]
            resp = await admin._request(node, CreateAclsRequest(
                creations=[*bad, creation(name="fine")]))
            codes = [r.error_code for r in resp.results]
            assert codes == [INVALID] * len(bad) + [0]
            assert all(r.error_message for r in resp.results[:-1])
            described = await admin._request(node, DescribeAclsRequest(
                resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))
            assert described.error_code == INVALID
            deleted = await admin._request(node, DeleteAclsRequest(filters=[
                dq.DeleteAclsFilter(1, None, 0, None, None, 1, 1),
                dq.DeleteAclsFilter(1, "nothing-here", 1, None, None, 1, 1)]))
            assert [r.error_code for r in deleted.filter_results] == [INVALID, 0]
            assert deleted.filter_results[1].matching_acls == []
            names = sorted(b.name for b in await admin.describe_acls())
            assert names == ["fine", "kept"]
    with Cluster(brokers=1, data_dir=tmp_path, config=CONFIG) as cluster:
        run(go(cluster))


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    prefixed = AclBinding(ResourceType.GROUP, "team-", PatternType.PREFIXED, "User:*",
                          "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY)

    async def create(cluster: Cluster) -> None:
        async with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            await admin.create_acls([GOOD, prefixed])

    with Cluster(brokers=1, data_dir=tmp_path, config=CONFIG) as cluster:
        run(create(cluster))
    with Cluster(brokers=1, data_dir=tmp_path, config=CONFIG) as cluster, \
            SyncAdmin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        assert sorted(admin.describe_acls(), key=str) == sorted([GOOD, prefixed], key=str)
        # the sync façade's delete: the filter's match is gone, the other binding kept
        assert admin.delete_acls([AclBindingFilter(resource_type=ResourceType.GROUP)]) == \
            [prefixed]
        assert admin.describe_acls(AclBindingFilter()) == [GOOD]


def test_more_than_ten_thousand_new_acls_in_one_request_fail_whole(tmp_path: Path) -> None:
    """Kafka's controller writes at most 10,000 records a request: CreateAcls adding more
    new, distinct bindings, or DeleteAcls removing more, gets POLICY_VIOLATION in every
    result (the invalid ones too) and changes nothing. Repeats and bindings that exist
    already do not count."""
    violation = errors.PolicyViolationError.code
    message = "Unable to perform excessively large batch operation."
    group_filter = dq.DeleteAclsFilter(3, None, 1, None, None, 1, 1)   # every GROUP binding

    async def go(cluster: Cluster) -> None:
        async with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            await admin.create_acls([GOOD])
            node = await admin._controller()
            groups = [creation(rt=3, name=f"g-{i}") for i in range(10_001)]
            resp = await admin._request(node, CreateAclsRequest(
                creations=[*groups, creation(name="")]))
            assert {(r.error_code, r.error_message) for r in resp.results} == \
                {(violation, message)}
            assert len(resp.results) == 10_002
            assert [b.name for b in await admin.describe_acls()] == ["kept"]
            # 10,001 copies of one binding, and one that exists already: two new at most
            same = [creation(name="same")] * 10_001
            kept = creation(name="kept", principal="User:alice", op=3)
            resp = await admin._request(node, CreateAclsRequest(
                creations=[*same, kept, creation(name="")]))
            assert [r.error_code for r in resp.results] == [0] * 10_002 + [INVALID]
            # exactly 10,000 new ones go in
            resp = await admin._request(node, CreateAclsRequest(creations=groups[:10_000]))
            assert {r.error_code for r in resp.results} == {0}
            assert len(await admin.describe_acls()) == 10_002
            # deleting them all and one more at once is refused whole ...
            everything = dq.DeleteAclsFilter(1, None, 1, None, None, 1, 1)
            deleted = await admin._request(node, DeleteAclsRequest(
                filters=[group_filter, everything]))
            assert [(r.error_code, r.error_message, r.matching_acls)
                    for r in deleted.filter_results] == [(violation, message, [])] * 2
            assert len(await admin.describe_acls()) == 10_002
            # ... and the 10,000 alone are deleted
            deleted = await admin._request(node, DeleteAclsRequest(filters=[group_filter]))
            assert deleted.filter_results[0].error_code == 0
            assert len(deleted.filter_results[0].matching_acls) == 10_000
            assert sorted(b.name for b in await admin.describe_acls()) == ["kept", "same"]
    with Cluster(brokers=1, data_dir=tmp_path, config=CONFIG) as cluster:
        run(go(cluster))


def test_cidr_hosts_need_metadata_version_4_4_iv1(tmp_path: Path) -> None:
    """As Kafka 4.4's controller: from 4.4-IV1 an ACL with a CIDR host is created (and
    enforced for the addresses in it: tests/cluster/acl/test_rules.py), an
    invalid block is INVALID_REQUEST; below 4.4-IV1 any host with a "/" is
    UNSUPPORTED_VERSION."""
    async def go(cluster: Cluster) -> list[tuple[int, str | None]]:
        async with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            node = await admin._controller()
            resp = await admin._request(node, CreateAclsRequest(creations=[
                creation(host="10.0.0.0/8"), creation(host="10.0.0/33"),
                creation(host="10.0.0.1")]))
            return [(r.error_code, r.error_message) for r in resp.results]

    with Cluster(brokers=1, data_dir=tmp_path, config=CONFIG) as cluster:
        good, bad, fine = run(go(cluster))
        assert (good[0], bad[0], fine[0]) == (0, INVALID, 0)
        assert (bad[1] or "").startswith("Invalid CIDR notation '10.0.0/33': ")
        cluster.controller.set_feature("metadata.version", 31)      # 4.4-IV0
        results = run(go(cluster))
    unsupported = (errors.UnsupportedVersionError.code,
                   "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    assert results == [unsupported, unsupported, (0, None)]
