"""A cluster without an authorizer, as Kafka's answers it: a group's authorized
operations are every one Kafka 4.4's ``AclEntry.supportedOperations`` lists for a group
(the config operations too), and the ACL APIs answer SECURITY_DISABLED. Found by the
Java Admin driver (tests/interop/java/AdminDriver.java): kaflite left the config
operations out of a group's and kept ACLs that nothing would check. (Topics and the
cluster: tests/cluster/acl/test_authorized_operations.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    Struct,
)
from kaflite.security.acl import AclBindingFilter
from kaflite.security.acl import AclOperation as Op

GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}


def bits(ops: set[Op]) -> int:
    return sum(1 << int(op) for op in ops)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        c.create_topic("ops", partitions=1, replication_factor=1)
        yield c


def ask(cluster: Cluster, req: Struct, version: int) -> Struct:
    async def go() -> Struct:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
        try:
            return await conn.request(req, version=version)
        finally:
            conn.close()
    return asyncio.run(asyncio.wait_for(go(), 30))


def test_groups(cluster: Cluster) -> None:
    described = ask(cluster, DescribeGroupsRequest(groups=["g"],
                                                   include_authorized_operations=True), version=5)
    assert isinstance(described, DescribeGroupsResponse)
    assert described.groups[0].authorized_operations == bits(GROUP_OPS)


def test_acls_without_an_authorizer_are_security_disabled(cluster: Cluster) -> None:
    """Kafka's AclApis without an authorizer: every ACL API answers SECURITY_DISABLED
    (kaflite kept the bindings, which nothing would ever check)."""
    from kaflite.protocol.messages import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )
    from kaflite.protocol.messages import create_acls_request as cq
    from kaflite.protocol.messages import delete_acls_request as dq

    disabled = 54
    created = ask(cluster, CreateAclsRequest(creations=[cq.AclCreation(
        resource_type=2, resource_name="ops", resource_pattern_type=3, principal="User:a",
        host="*", operation=3, permission_type=3)]), version=3)
    assert isinstance(created, CreateAclsResponse)
    assert [r.error_code for r in created.results] == [disabled]
    described = ask(cluster, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1), version=3)
    assert isinstance(described, DescribeAclsResponse)
    assert (described.error_code, described.resources) == (disabled, [])
    deleted = ask(cluster, DeleteAclsRequest(filters=[dq.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]), version=3)
    assert isinstance(deleted, DeleteAclsResponse)
    assert [r.error_code for r in deleted.filter_results] == [disabled]
    assert not cluster.controller.acls.describe(AclBindingFilter())
