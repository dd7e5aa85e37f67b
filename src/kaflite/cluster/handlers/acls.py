"""DescribeAcls (key 29), CreateAcls (30) and DeleteAcls (31).

The bindings live in the controller's metadata (``Controller.acls``), so every
broker's authorizer sees a change at once, and a restarted cluster has them
back. As in Kafka, DescribeAcls needs DESCRIBE on the cluster and the other two
ALTER (else CLUSTER_AUTHORIZATION_FAILED); a binding Kafka refuses (an unknown
or ANY enum, an empty resource name, a CLUSTER resource not named
``kafka-cluster``, a principal that is not ``Type:name``, a PREFIXED ``*``, a host
that is not a valid CIDR block) gets INVALID_REQUEST in its own result and the
others are still created; a CIDR host below ``metadata.version`` 4.4-IV1 gets
UNSUPPORTED_VERSION, as Kafka's controller answers it; a filter
with an UNKNOWN field gets INVALID_REQUEST (Describe: for the request; Delete:
for that filter). Nothing is changed by a refused request, and a binding that
is already there stays as it is.

Kafka's controller writes at most 10,000 records for one request
(``MAX_RECORDS_PER_USER_OP``): a CreateAcls that would add more new, distinct
bindings, or a DeleteAcls whose filters would remove more, fails whole with
POLICY_VIOLATION in every result (the invalid ones too) and changes nothing.

Without an authorizer (``authorizer.class.name`` unset) the three answer
SECURITY_DISABLED, as Kafka's AclApis: there is nothing to keep ACLs for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.acl import allows_cluster
from kaflite.cluster.controller import MAX_RECORDS_PER_REQUEST, TOO_LARGE_BATCH
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.metalog import metadata_versions
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kaflite.protocol.messages import create_acls_response as cr
from kaflite.protocol.messages import delete_acls_request as dq
from kaflite.protocol.messages import delete_acls_response as dr
from kaflite.protocol.messages import describe_acls_response as sr
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    CidrNotSupported,
    InvalidAcl,
    validate_binding,
    validate_filter,
)

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

INVALID = errors.InvalidRequestError.code
UNSUPPORTED = errors.UnsupportedVersionError.code
DENIED = errors.ClusterAuthorizationFailedError.code
TOO_LARGE = errors.PolicyViolationError.code
DISABLED = errors.SecurityDisabledError.code
NO_AUTHORIZER = "No Authorizer is configured."


def _filter(f: DescribeAclsRequest | dq.DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter,
                               f.pattern_type_filter, f.principal_filter, f.host_filter,
                               f.operation, f.permission_type)


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeAclsRequest) -> DescribeAclsResponse:
    if broker.authorizer is None:
        return DescribeAclsResponse(error_code=DISABLED, error_message=NO_AUTHORIZER)
    if not allows_cluster(broker, conn, AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=DENIED, error_message=None)
    f = _filter(req)
    try:
        validate_filter(f)
    except InvalidAcl as exc:
        return DescribeAclsResponse(error_code=INVALID, error_message=str(exc))
    resources: dict[tuple[int, str, int], sr.DescribeAclsResource] = {}
    for b in broker.controller.acls.describe(f):
        key = (int(b.resource_type), b.name, int(b.pattern_type))
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = sr.DescribeAclsResource(*key)
        resource.acls.append(sr.AclDescription(b.principal, b.host, int(b.operation),
                                               int(b.permission)))
    return DescribeAclsResponse(error_code=0, error_message=None,
                                resources=list(resources.values()))


async def handle_create(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: CreateAclsRequest) -> CreateAclsResponse:
    if broker.authorizer is None:
        return CreateAclsResponse(results=[cr.AclCreationResult(DISABLED, NO_AUTHORIZER)
                                           for _ in req.creations])
    if not allows_cluster(broker, conn, AclOperation.ALTER):
        return CreateAclsResponse(results=[cr.AclCreationResult(DENIED, None)
                                           for _ in req.creations])
    results, valid = [], []
    for c in req.creations:
        b = AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type,
                          c.principal, c.host, c.operation, c.permission_type)
        try:
            validate_binding(b, cidr_hosts=metadata_versions.cidr_acls(
                features.level(broker.controller, "metadata.version")))
        except CidrNotSupported as exc:
            results.append(cr.AclCreationResult(UNSUPPORTED, str(exc)))
            continue
        except InvalidAcl as exc:
            results.append(cr.AclCreationResult(INVALID, str(exc)))
            continue
        valid.append(b)
        results.append(cr.AclCreationResult(0, None))
    existing = broker.controller.acls
    if len({b for b in valid if b not in existing}) > MAX_RECORDS_PER_REQUEST:
        return CreateAclsResponse(results=[cr.AclCreationResult(TOO_LARGE, TOO_LARGE_BATCH)
                                           for _ in req.creations])
    if valid:
        broker.controller.create_acls(valid)
    return CreateAclsResponse(results=results)


async def handle_delete(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: DeleteAclsRequest) -> DeleteAclsResponse:
    if broker.authorizer is None:
        return DeleteAclsResponse(filter_results=[
            dr.DeleteAclsFilterResult(DISABLED, NO_AUTHORIZER) for _ in req.filters])
    if not allows_cluster(broker, conn, AclOperation.ALTER):
        return DeleteAclsResponse(filter_results=[dr.DeleteAclsFilterResult(DENIED, None)
                                                  for _ in req.filters])
    filters: list[AclBindingFilter | str] = []    # a filter, or why it is refused
    for raw in req.filters:
        parsed = _filter(raw)
        try:
            validate_filter(parsed)
        except InvalidAcl as exc:
            filters.append(str(exc))
            continue
        filters.append(parsed)
    valid = [f for f in filters if isinstance(f, AclBindingFilter)]
    if sum(len(broker.controller.acls.describe(f)) for f in valid) > MAX_RECORDS_PER_REQUEST:
        return DeleteAclsResponse(filter_results=[
            dr.DeleteAclsFilterResult(TOO_LARGE, TOO_LARGE_BATCH) for _ in req.filters])
    deleted = iter(broker.controller.delete_acls(valid))
    results = []
    for f in filters:
        if isinstance(f, str):
            results.append(dr.DeleteAclsFilterResult(INVALID, f))
            continue
        results.append(dr.DeleteAclsFilterResult(0, None, matching_acls=[
            dr.DeleteAclsMatchingAcl(0, None, int(b.resource_type), b.name,
                                     int(b.pattern_type), b.principal, b.host,
                                     int(b.operation), int(b.permission))
            for b in next(deleted)]))
    return DeleteAclsResponse(filter_results=results)


HANDLERS = [Handler(DescribeAclsRequest, 0, 3, handle_describe),
            Handler(CreateAclsRequest, 0, 3, handle_create),
            Handler(DeleteAclsRequest, 0, 3, handle_delete)]
