"""The built-in authorizer: Kafka's StandardAuthorizer rules over an ``AclStore``.

``authorize(principal, host, operation, resource type, name)``:

* a super user (``super.users``, a semicolon-separated list of principals) may do
  anything, and so may the cluster's own brokers on their inter-broker connections;
* the bindings that apply are those for the resource's literal name, the literal
  ``*`` and every PREFIXED pattern the name starts with, whose principal is the
  caller's or ``User:*`` and whose host is the caller's, ``*`` or a CIDR block
  holding the caller's address;
* a DENY among them for the operation (or ALL) denies; else an ALLOW for it, for
  ALL or for an operation implying it (DESCRIBE from READ, WRITE, DELETE, ALTER;
  DESCRIBE_CONFIGS from ALTER_CONFIGS) allows;
* with no binding at all on the resource, ``allow.everyone.if.no.acl.found``
  decides (false by default); otherwise the answer is no.

``authorize_any`` is Kafka's ``authorizeByResourceType`` (KIP-679): may the caller
do the operation on at least one resource of a type, given the ALLOWs and DENYs it
has (InitProducerId's "IDEMPOTENT_WRITE on the cluster or WRITE on any topic").

Answers are cached per (principal, host, operation, resource); the cache is
dropped when the store's version moves, so an ACL change applies to the very next
request.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.cluster.acl._store import AclStore
from kaflite.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    host_matches,
    implies,
)

__all__ = ["Authorizer", "enabled"]

CACHE_MAX = 65536
DENY = AclPermissionType.DENY


def enabled(props: Mapping[str, str]) -> bool:
    """Any non-empty ``authorizer.class.name`` turns the built-in authorizer on."""
    return bool(props.get("authorizer.class.name", "").strip())


def _principal_matches(acl_principal: str, principal: str) -> bool:
    return acl_principal == principal or (
        acl_principal == WILDCARD_PRINCIPAL and principal.startswith("User:"))


class Authorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self._version = store.version

    @classmethod
    def from_config(cls, props: Mapping[str, str], store: AclStore) -> Authorizer | None:
        """The authorizer ``props`` ask for; None when ``authorizer.class.name`` is unset."""
        if not enabled(props):
            return None
        supers = frozenset(p.strip() for p in props.get("super.users", "").split(";")
                           if p.strip())
        allow = props.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true"
        return cls(store, supers, allow)

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        if self._version != self.store.version:
            self._cache.clear()
            self._version = self.store.version
        key = (principal, host, operation, resource_type, name)
        answer = self._cache.get(key)
        if answer is None:
            answer = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = answer
        return answer

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        found = allowed = False
        for b in self.store.matching(resource_type, name):
            found = True
            if not _principal_matches(b.principal, principal) or not host_matches(b.host, host):
                continue
            if not implies(b.operation, operation, b.permission):
                continue
            if b.permission == DENY:
                return False
            allowed = True
        return allowed or (not found and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: allowed on at least one resource of the type."""
        if principal in self.super_users:
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        found = False
        for b in self.store.of_type(resource_type):
            found = True
            if not _principal_matches(b.principal, principal) or not host_matches(b.host, host):
                continue
            if b.operation not in (operation, AclOperation.ALL):
                continue
            literal = b.pattern_type == PatternType.LITERAL
            if b.permission == DENY:
                (deny_literal if literal else deny_prefixed).add(b.name)
            else:
                (allow_literal if literal else allow_prefixed).add(b.name)
        if not found:
            return self.allow_if_no_acl
        if WILDCARD in deny_literal:
            return False
        if WILDCARD in allow_literal:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(d) for d in deny_prefixed)

        return any(not denied_by_prefix(p) for p in allow_prefixed) or any(
            n not in deny_literal and not denied_by_prefix(n) for n in allow_literal)
