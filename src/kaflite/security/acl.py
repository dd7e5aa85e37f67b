"""ACL bindings and binding filters, as Kafka's ``org.apache.kafka.common.acl`` has them.

A binding is a resource pattern (resource type, name, pattern type) and an
access control entry (principal, host, operation, permission). A filter has the
same fields, where ``None`` and the ANY values match anything and the MATCH
pattern type matches the patterns that would apply to a resource name
(its literal name, the literal ``*`` and every prefix of it).

An entry's host is a client address, ``*`` for every one, or a CIDR block
(``10.0.0.0/8``, ``2001:db8::/32``) matching every address in it, as Kafka 4.4's
authorizer has them from ``metadata.version`` 4.4-IV1 on; below that level a CIDR
host is refused (``CidrNotSupported``).

The enum values are Kafka's wire codes; both the broker (``kaflite.cluster.acl``)
and the client's admin use this module. Nothing here does any I/O.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CidrNotSupported",
    "InvalidAcl",
    "PatternType",
    "ResourceType",
    "host_matches",
    "implies",
    "parse_principal",
    "validate_binding",
    "validate_filter",
]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's implied operations: an ALLOW of the key implies an ALLOW of each value.
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


def implies(granted: AclOperation, wanted: AclOperation,
            permission: AclPermissionType) -> bool:
    """Whether an entry for ``granted`` applies to a check of ``wanted``.

    ALL applies to everything; an ALLOW also covers the operations Kafka derives from
    it (DESCRIBE from READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS from
    ALTER_CONFIGS). A DENY covers only its own operation (or everything, for ALL).
    """
    if granted in (wanted, AclOperation.ALL):
        return True
    return permission == AclPermissionType.ALLOW and granted in _IMPLIED_BY.get(wanted, ())


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses (it answers INVALID_REQUEST with this message)."""


class CidrNotSupported(InvalidAcl):
    """A CIDR host below ``metadata.version`` 4.4-IV1 (Kafka answers UNSUPPORTED_VERSION)."""


_E = TypeVar("_E", bound=enum.IntEnum)


def _enum(cls: type[_E], code: int) -> _E:
    try:
        return cls(code)
    except ValueError:
        return cls(0)    # Kafka maps an unknown code to UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission: int) -> AclBinding:
        """A binding from wire codes; unknown codes become UNKNOWN (validate it after)."""
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type),
                   principal, host, _enum(AclOperation, operation),
                   _enum(AclPermissionType, permission))

    def to_json(self) -> list[str]:
        return [self.resource_type.name, self.name, self.pattern_type.name, self.principal,
                self.host, self.operation.name, self.permission.name]

    @classmethod
    def from_json(cls, row: list[str]) -> AclBinding:
        rt, name, pt, principal, host, op, perm = row
        return cls(ResourceType[rt], name, PatternType[pt], principal, host,
                   AclOperation[op], AclPermissionType[perm])


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: None (or ANY) matches every value of a field."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int,
           principal: str | None, host: str | None, operation: int,
           permission: int) -> AclBindingFilter:
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type),
                   principal, host, _enum(AclOperation, operation),
                   _enum(AclPermissionType, permission))

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b) and self.matches_entry(b)

    def matches_pattern(self, b: AclBinding) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.name == b.name
        if b.pattern_type == PatternType.LITERAL:    # MATCH
            return b.name in (self.name, WILDCARD)
        return self.name.startswith(b.name)

    def matches_entry(self, b: AclBinding) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``."""
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission in (AclPermissionType.ANY, b.permission))


def parse_principal(text: str) -> tuple[str, str]:
    """``"User:alice"`` -> ``("User", "alice")``; raises ``InvalidAcl``."""
    kind, sep, name = text.partition(":")
    if not sep:
        raise InvalidAcl(f"Could not parse principal from `{text}` (no colon is present "
                         "separating the principal type from the principal name)")
    if not kind or not name:
        raise InvalidAcl(f"Invalid principal `{text}`: expected principalType:principalName")
    return kind, name


def validate_binding(b: AclBinding, cidr_hosts: bool = True) -> None:
    """Kafka's checks of a new ACL (``AclControlManager.validateNewAcl`` and the broker's
    CreateAcls); raises ``InvalidAcl``. ``cidr_hosts``: whether the cluster's
    ``metadata.version`` takes CIDR hosts."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {b.resource_type.name}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {b.pattern_type.name}")
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {b.operation.name}")
    if b.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"Invalid permissionType {b.permission.name}")
    if not b.name:
        raise InvalidAcl("Invalid empty resource name")
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if b.pattern_type == PatternType.PREFIXED and b.name == WILDCARD:
        raise InvalidAcl("A PREFIXED pattern cannot be the wildcard '*' "
                         "(use a LITERAL '*' to match every name)")
    if not b.host:
        raise InvalidAcl("Invalid empty host (use '*' for every host)")
    parse_principal(b.principal)
    if "/" in b.host and b.host != WILDCARD:
        if not cidr_hosts:
            raise CidrNotSupported("CIDR-based ACL host patterns require metadata version "
                                   "4.4-IV1 or higher.")
        try:
            ipaddress.ip_network(b.host, strict=False)
        except ValueError as exc:
            raise InvalidAcl(f"Invalid CIDR notation '{b.host}': {exc}") from None


def host_matches(acl_host: str, host: str) -> bool:
    """Whether an entry's host covers a client's address (Kafka 4.4's
    ``StandardAuthorizerData``: equal, ``*``, or an address of its CIDR block)."""
    if acl_host in (host, WILDCARD):
        return True
    if "/" not in acl_host:
        return False
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(acl_host, strict=False)
    except ValueError:
        return False


def validate_filter(f: AclBindingFilter) -> None:
    """What DescribeAcls and DeleteAcls refuse in a filter: an UNKNOWN field."""
    for value in (f.resource_type, f.pattern_type, f.operation, f.permission):
        if value.name == "UNKNOWN":
            raise InvalidAcl(f"The filter has an unknown {type(value).__name__}")
