"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49).

The quotas live in the controller's metadata (``Controller.client_quotas``) and
apply on every broker as soon as they change.

Describe takes filter components, one per entity type: ``match_type`` 0 matches
the name given (a null name: the ``<default>`` entity), 1 the ``<default>``
entity, 2 any named entity. With ``strict`` an entity must have exactly the
filter's types; without, it must have at least them (no component: every
entity). A bad filter (an unknown match type or entity type, a type twice, a
name with match type 1 or 2, ``ip`` beside user or client-id) fails the whole
request with INVALID_REQUEST.

Alter applies each entry on its own: a bad entity (empty, a type twice, an
unknown type, an empty name, a combination other than user, client-id, user
and client-id) or a bad op (an unknown key, a key twice, a value that is not a
positive number, a fraction for a byte rate) fails that entry with
INVALID_REQUEST and leaves it unchanged. ``validate_only`` checks and changes
nothing. As Kafka's controller (at most 10,000 records for one request,
``MAX_RECORDS_PER_USER_OP``: one a quota that changes), a request whose valid
entries would change more than 10,000 quotas fails whole: POLICY_VIOLATION in
every entry, nothing changed. kaflite has no IP connection-rate quotas: an
``ip`` entity is refused as invalid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.controller import MAX_RECORDS_PER_REQUEST, TOO_LARGE_BATCH
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.quotas.entities import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    USER,
    Entity,
    entity_from_pairs,
    value_error,
)
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kaflite.protocol.messages import alter_client_quotas_request as aq
from kaflite.protocol.messages import alter_client_quotas_response as ar
from kaflite.protocol.messages import describe_client_quotas_request as dq
from kaflite.protocol.messages import describe_client_quotas_response as dr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "MATCH_ANY", "MATCH_DEFAULT", "MATCH_EXACT"]

INVALID_REQUEST = errors.InvalidRequestError.code
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def _filter_error(components: list[dq.ComponentData]) -> str | None:
    types = [c.entity_type for c in components]
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            return f"Invalid entity type {c.entity_type!r} in the filter"
        if types.count(c.entity_type) > 1:
            return f"Entity type {c.entity_type} cannot appear more than once in the filter"
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unknown match type {c.match_type}"
        if c.match_type != MATCH_EXACT and c.match is not None:
            return f"A match type of {c.match_type} takes no name to match"
    if IP in types and (USER in types or CLIENT_ID in types):
        return "An ip filter component cannot be used with a user or client-id component"
    return None


def _matches(entity: Entity, components: list[dq.ComponentData], strict: bool) -> bool:
    names = dict(entity)
    if strict and set(names) != {c.entity_type for c in components}:
        return False
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if c.match_type == MATCH_EXACT and name != c.match:
            return False
        if c.match_type == MATCH_DEFAULT and name is not None:
            return False
        if c.match_type == MATCH_ANY and name is None:
            return False
    return True


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    why = _filter_error(req.components)
    if why is not None:
        return DescribeClientQuotasResponse(error_code=INVALID_REQUEST, error_message=why,
                                            entries=None)
    store = broker.controller.client_quotas
    entries = [
        dr.EntryData(entity=[dr.EntityData(t, n) for t, n in entity],
                     values=[dr.ValueData(k, v) for k, v in sorted(values.items())])
        for entity, values in sorted(store.entries.items(), key=lambda kv: repr(kv[0]))
        if _matches(entity, req.components, req.strict)]
    return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)


def entity_error(pairs: list[tuple[str, str | None]]) -> str | None:
    """Why an AlterClientQuotas entity is invalid (None if it is fine)."""
    types = [t for t, _ in pairs]
    if not pairs:
        return "Invalid empty client quota entity"
    for t, name in pairs:
        if t not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {t}"
        if types.count(t) > 1:
            return f"Duplicate {t} in the client quota entity"
        if name == "":
            return f"Invalid empty {t} name in the client quota entity"
    if IP in types:
        return "kaflite has no IP (connection rate) quotas"
    return None


def _ops_error(ops: list[aq.OpData]) -> str | None:
    keys = [op.key for op in ops]
    for op in ops:
        if keys.count(op.key) > 1:
            return f"Duplicate quota key {op.key} for one entity"
        why = value_error(op.key, 1.0 if op.remove else op.value)
        if why is not None:
            return why
    return None


async def handle_alter(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    results = []
    changes: list[tuple[Entity, dict[str, float], set[str]]] = []
    for entry in req.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        why = entity_error(pairs) or _ops_error(entry.ops)
        results.append(ar.EntryData(
            error_code=INVALID_REQUEST if why else 0, error_message=why,
            entity=[ar.EntityData(t, n) for t, n in pairs]))
        if why is None:
            changes.append((entity_from_pairs(pairs),
                            {op.key: op.value for op in entry.ops if not op.remove},
                            {op.key for op in entry.ops if op.remove}))
    store = broker.controller.client_quotas
    changed = sum(sum(store.get(entity, k) != v for k, v in sets.items())
                  + sum(store.get(entity, k) is not None for k in removals)
                  for entity, sets, removals in changes)
    if changed > MAX_RECORDS_PER_REQUEST:
        for r in results:
            r.error_code, r.error_message = errors.PolicyViolationError.code, TOO_LARGE_BATCH
    elif changes and not req.validate_only:
        broker.controller.alter_client_quotas(changes)
    return AlterClientQuotasResponse(entries=results)


HANDLERS = [Handler(DescribeClientQuotasRequest, 0, 1, handle_describe),
            Handler(AlterClientQuotasRequest, 0, 1, handle_alter)]
