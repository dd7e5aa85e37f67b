"""Client quotas for ``Admin`` (KIP-546): filters, alterations, and the two requests.

An entity is a mapping of entity type (``user``, ``client-id``) to a name, or to
``None`` for the ``<default>`` entity, as Java's ``ClientQuotaEntity``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kaflite.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kaflite.protocol.messages import alter_client_quotas_request as aq
from kaflite.protocol.messages import describe_client_quotas_request as dq

__all__ = ["ClientQuotaAlteration", "QuotaEntity", "QuotaFilterComponent", "alter_request",
           "describe_request", "entity_key", "parse_describe"]

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
# An entity as a hashable key: sorted (type, name) pairs, None = <default>.
QuotaEntity = tuple[tuple[str, str | None], ...]


def entity_key(entity: Mapping[str, str | None]) -> QuotaEntity:
    return tuple(sorted(entity.items()))


@dataclass(frozen=True)
class QuotaFilterComponent:
    """One component of a DescribeClientQuotas filter (Java's ClientQuotaFilterComponent)."""

    entity_type: str
    match: str | None = None
    match_type: int = MATCH_EXACT

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> QuotaFilterComponent:
        return cls(entity_type, name, MATCH_EXACT)

    @classmethod
    def of_default(cls, entity_type: str) -> QuotaFilterComponent:
        return cls(entity_type, None, MATCH_DEFAULT)

    @classmethod
    def of_any(cls, entity_type: str) -> QuotaFilterComponent:
        return cls(entity_type, None, MATCH_ANY)


@dataclass(frozen=True)
class ClientQuotaAlteration:
    """Set (a number) or remove (``None``) quota keys of one entity."""

    entity: Mapping[str, str | None]
    ops: Mapping[str, float | None] = field(default_factory=dict)


def describe_request(components: Iterable[QuotaFilterComponent], strict: bool
                     ) -> DescribeClientQuotasRequest:
    return DescribeClientQuotasRequest(
        components=[dq.ComponentData(c.entity_type, c.match_type, c.match) for c in components],
        strict=strict)


def parse_describe(resp: DescribeClientQuotasResponse) -> dict[QuotaEntity, dict[str, float]]:
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in resp.entries or []}


def alter_request(alterations: Iterable[ClientQuotaAlteration], validate_only: bool
                  ) -> AlterClientQuotasRequest:
    return AlterClientQuotasRequest(validate_only=validate_only, entries=[
        aq.EntryData(entity=[aq.EntityData(t, n) for t, n in a.entity.items()],
                     ops=[aq.OpData(k, 0.0 if v is None else float(v), v is None)
                          for k, v in a.ops.items()])
        for a in alterations])


def alter_errors(resp: AlterClientQuotasResponse) -> list[tuple[QuotaEntity, int, str | None]]:
    """(entity, error code, message) of each entry that failed."""
    return [(tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)),
             entry.error_code, entry.error_message)
            for entry in resp.entries if entry.error_code]
