"""Users, ACLs and client quotas for the console, through the Kafka protocol.

- SCRAM users (KIP-554): DescribeUserScramCredentials and AlterUserScramCredentials;
  the password is salted in this process and never sent (``Admin``'s own rule).
- ACLs (KIP-140): DescribeAcls, CreateAcls, DeleteAcls; a cluster without an
  authorizer answers SECURITY_DISABLED, which the list turns into ``enabled: false``.
- Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas.

The same calls ``kaflite users``, ``kaflite acls`` and ``kaflite quotas`` make, so
the console works on any Kafka cluster, not only on kaflite's.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from kaflite.cli.acls import as_json
from kaflite.client._quotas import ClientQuotaAlteration
from kaflite.console.backend import ClientBackend
from kaflite.console.web import ApiError, Json, JsonBody
from kaflite.protocol import errors
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflite.security.scram import MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS

__all__ = ["MECHANISMS", "QUOTA_ENTITY_TYPES", "acl_binding", "alter_quota", "create_acl",
           "delete_acl", "delete_user", "list_acls", "list_quotas", "list_users",
           "upsert_user"]

MECHANISMS = tuple(MECHANISM_TYPES)
QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")


# -- SCRAM users --------------------------------------------------------------------------
async def list_users(backend: ClientBackend) -> Json:
    admin = await backend.admin()
    found = await admin.describe_user_scram_credentials()
    return {"users": [{"user": user, "credentials": [
        {"mechanism": m, "iterations": i} for m, i in sorted(creds)]}
        for user, creds in sorted(found.items())]}


def _mechanism(value: object) -> str:
    mechanism = str(value or MECHANISMS[0]).upper()
    if mechanism not in MECHANISMS:
        raise ApiError(400, f"mechanism must be one of {', '.join(MECHANISMS)}, got {value!r}")
    return mechanism


async def upsert_user(backend: ClientBackend, body: JsonBody) -> Json:
    """Add a SCRAM user, or set its password: {user, password, mechanism, iterations}."""
    user, password = body.get("user"), body.get("password")
    if not isinstance(user, str) or not user.strip():
        raise ApiError(400, "user must be a non-empty string")
    if not isinstance(password, str) or not password:
        raise ApiError(400, "password must be a non-empty string")
    iterations = body.get("iterations", MIN_ITERATIONS)
    if not isinstance(iterations, int) or isinstance(iterations, bool) or \
            not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ApiError(400, f"iterations must be a number from {MIN_ITERATIONS} to "
                            f"{MAX_ITERATIONS}, got {iterations!r}")
    admin = await backend.admin()
    await admin.alter_user_scram_credentials(
        upsertions=[(user, _mechanism(body.get("mechanism")), password, iterations)])
    return await list_users(backend)


async def delete_user(backend: ClientBackend, user: str, mechanism: str | None) -> Json:
    """Delete a user's credential of one mechanism, or every credential it has."""
    admin = await backend.admin()
    found = (await admin.describe_user_scram_credentials()).get(user, [])
    have = [m for m, _ in found]
    mechanisms = [_mechanism(mechanism)] if mechanism else have
    if not have or not set(mechanisms) <= set(have):
        raise ApiError(404, f"no SCRAM credential for user {user!r}"
                            + (f" with {mechanism}" if mechanism else ""))
    await admin.alter_user_scram_credentials(deletions=[(user, m) for m in mechanisms])
    return {"deleted": user, "mechanisms": mechanisms}


# -- ACLs ---------------------------------------------------------------------------------
E = TypeVar("E", bound=enum.Enum)


def _enum(cls: type[E], body: JsonBody, name: str, default: str | None = None) -> E:
    value = body.get(name, default)
    try:
        return cls[str(value).strip().upper().replace("-", "_")]
    except KeyError:
        raise ApiError(400, f"{name}: unknown value {value!r}") from None


def acl_binding(body: JsonBody) -> AclBinding:
    """One binding from the page's form: {resource_type, name, pattern_type=LITERAL,
    principal, host=*, operation, permission_type=ALLOW}, names as Kafka's enums."""
    name, principal = body.get("name"), body.get("principal")
    if not isinstance(name, str) or not name:
        raise ApiError(400, "name (the resource's) must be a non-empty string")
    if not isinstance(principal, str) or ":" not in principal:
        raise ApiError(400, f"principal must be TYPE:NAME (User:alice), got {principal!r}")
    host = body.get("host", "*")
    if not isinstance(host, str) or not host:
        raise ApiError(400, "host must be a host name or *")
    return AclBinding(_enum(ResourceType, body, "resource_type"), name,
                      _enum(PatternType, body, "pattern_type", "LITERAL"), principal, host,
                      _enum(AclOperation, body, "operation"),
                      _enum(AclPermissionType, body, "permission_type", "ALLOW"))


async def list_acls(backend: ClientBackend) -> Json:
    admin = await backend.admin()
    try:
        found = await admin.describe_acls()
    except errors.SecurityDisabledError as exc:
        return {"enabled": False, "acls": [], "note": f"the cluster keeps no ACLs: {exc} "
                "(kaflite up: authorizer.class.name=kaflite)"}
    rows = sorted(as_json(found), key=lambda r: tuple(r.values()))
    return {"enabled": True, "acls": rows, "note": None}


async def create_acl(backend: ClientBackend, body: JsonBody) -> Json:
    binding = acl_binding(body)
    await (await backend.admin()).create_acls([binding])
    return {"created": as_json([binding])[0]}


async def delete_acl(backend: ClientBackend, body: JsonBody) -> Json:
    """Delete exactly one binding (the filter has every field of it)."""
    b = acl_binding(body)
    deleted = await (await backend.admin()).delete_acls([AclBindingFilter(
        b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation,
        b.permission)])
    if not deleted:
        raise ApiError(404, f"no such ACL: {as_json([b])[0]}")
    return {"deleted": as_json(deleted)}


# -- client quotas ------------------------------------------------------------------------
def _entity(value: object) -> dict[str, str | None]:
    if not isinstance(value, dict) or not value:
        raise ApiError(400, "entity must be an object such as {\"user\": \"alice\"} "
                            "(null: the default)")
    out: dict[str, str | None] = {}
    for k, v in value.items():
        if k not in QUOTA_ENTITY_TYPES:
            raise ApiError(400, f"entity: unknown type {k!r} (one of "
                                f"{', '.join(QUOTA_ENTITY_TYPES)})")
        if v is not None and (not isinstance(v, str) or not v):
            raise ApiError(400, f"entity {k}: a name, or null for the default")
        out[str(k)] = v
    return out


async def list_quotas(backend: ClientBackend) -> Json:
    found = await (await backend.admin()).describe_client_quotas()
    return {"quotas": [{"entity": dict(entity), "values": values}
                       for entity, values in sorted(found.items(), key=lambda kv: str(kv[0]))]}


async def alter_quota(backend: ClientBackend, body: JsonBody) -> Json:
    """Set and remove quota keys of one entity: {entity, set: {key: number}, delete: [key]}."""
    entity = _entity(body.get("entity"))
    ops: dict[str, float | None] = {}
    sets, deletes = body.get("set") or {}, body.get("delete") or []
    if not isinstance(sets, dict):
        raise ApiError(400, "set must be an object of quota keys to numbers")
    for k, v in sets.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ApiError(400, f"quota {k!r}: the value must be a number, got {v!r}")
        ops[str(k)] = float(v)
    if not isinstance(deletes, list) or not all(isinstance(d, str) for d in deletes):
        raise ApiError(400, "delete must be a list of quota keys")
    ops.update({d: None for d in deletes})
    if not ops:
        raise ApiError(400, "nothing to change: give set or delete")
    await (await backend.admin()).alter_client_quotas([ClientQuotaAlteration(entity, ops)])
    return await list_quotas(backend)
