"""The admin's ACL calls (KIP-140): CreateAcls, DescribeAcls and DeleteAcls.

Bindings and filters are ``kaflite.security.acl``'s ``AclBinding`` and
``AclBindingFilter`` (Java's classes of the same names). As Java's admin, a
binding or filter the broker refuses raises its error (INVALID_REQUEST,
CLUSTER_AUTHORIZATION_FAILED...) as the ``kaflite.protocol.errors`` class of
its code, after the others of the same call were applied.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kaflite.client._admin_base import check as _raise
from kaflite.client._base import BaseClient
from kaflite.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kaflite.protocol.messages import create_acls_request as cq
from kaflite.protocol.messages import delete_acls_request as dq
from kaflite.security.acl import AclBinding, AclBindingFilter

__all__ = ["AclAdmin"]


class AclAdmin(BaseClient):
    """Mixed into ``Admin``: the ACL calls go to the controller, as topic changes do."""

    if TYPE_CHECKING:
        async def _controller(self) -> int: ...     # Admin's: the broker to ask

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        bindings = list(bindings)
        await self.start()
        resp = await self._request(await self._controller(), CreateAclsRequest(creations=[
            cq.AclCreation(int(b.resource_type), b.name, int(b.pattern_type), b.principal,
                           b.host, int(b.operation), int(b.permission)) for b in bindings]))
        for b, r in zip(bindings, resp.results, strict=False):
            _raise(r.error_code, f"create ACL {b}", r.error_message)

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None
                            ) -> list[AclBinding]:
        """Every binding the filter matches (all of them by default)."""
        f = acl_filter if acl_filter is not None else AclBindingFilter()
        await self.start()
        resp = await self._request(await self._controller(), DescribeAclsRequest(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
            host_filter=f.host, operation=int(f.operation), permission_type=int(f.permission)))
        _raise(resp.error_code, "describe ACLs", resp.error_message)
        return [AclBinding.of(r.resource_type, r.resource_name, r.pattern_type, a.principal,
                              a.host, a.operation, a.permission_type)
                for r in resp.resources for a in r.acls]

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete what each filter matches; the bindings deleted."""
        filters = list(filters)
        await self.start()
        resp = await self._request(await self._controller(), DeleteAclsRequest(filters=[
            dq.DeleteAclsFilter(int(f.resource_type), f.name, int(f.pattern_type), f.principal,
                                f.host, int(f.operation), int(f.permission))
            for f in filters]))
        out = []
        for f, r in zip(filters, resp.filter_results, strict=False):
            _raise(r.error_code, f"delete ACLs matching {f}", r.error_message)
            for m in r.matching_acls:
                _raise(m.error_code, "delete ACL", m.error_message)
                out.append(AclBinding.of(m.resource_type, m.resource_name, m.pattern_type,
                                         m.principal, m.host, m.operation, m.permission_type))
        return out
