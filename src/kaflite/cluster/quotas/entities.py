"""Client quota entities, their keys and values, and which entity applies to a client.

An entity is a user, a client id, or both (KIP-55); a name of ``None`` is the
``<default>`` entity of its type. Kafka's precedence, for one quota key (each
key is looked up on its own):

1. user and client-id            5. <default> user and <default> client-id
2. user and <default> client-id  6. <default> user
3. user                          7. client-id
4. <default> user and client-id  8. <default> client-id

The first entity that sets the key gives the limit. It also decides what the
client shares its rate with (Kafka's metric tags): the (user, client-id) pair
for 1, 2, 4 and 5, every connection of the user for 3 and 6, every connection
with that client id for 7 and 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CLIENT_ID",
    "ENTITY_TYPES",
    "IP",
    "QUOTA_KEYS",
    "USER",
    "Entity",
    "QuotaStore",
    "Resolved",
    "entity_from_pairs",
    "entity_label",
    "user_of",
    "value_error",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
# Kafka's quota configs and their types (QuotaConfig).
QUOTA_KEYS = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}

# An entity: sorted (type, name) pairs; name None is <default>.
Entity = tuple[tuple[str, str | None], ...]


def entity_from_pairs(pairs: list[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs))


def entity_label(entity: Entity) -> str:
    """``user=alice, client-id=<default>``: how ``kafka-configs.sh`` names it."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def user_of(principal: str) -> str:
    """The user name a quota matches: the principal's name (``User:alice`` -> alice)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def value_error(key: str, value: float) -> str | None:
    """Why ``value`` is no good for ``key`` (None if it is)."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if math.isnan(value) or math.isinf(value):
        return f"Invalid value {value} for configuration key {key}"
    if value <= 0:
        return f"Quota {key} must be greater than 0, not {value}"
    if kind == "LONG" and (value != int(value) or value > 2**63 - 1):
        return f"Configuration {key} must be a Long value, not {value}"
    return None


@dataclass(frozen=True)
class Resolved:
    """The limit that applies to a client for one key, and who shares its rate."""

    limit: float
    user_tag: str           # "" when the rate is not per user
    client_tag: str         # "" when the rate is not per client id
    entity: Entity

    @property
    def tags(self) -> tuple[str, str]:
        return self.user_tag, self.client_tag


class QuotaStore:
    """Every entity's quotas: what DescribeClientQuotas shows and throttling uses.

    ``version`` goes up on every change, so readers can cache resolutions."""

    def __init__(self) -> None:
        self.entries: dict[Entity, dict[str, float]] = {}
        self.version = 0

    def __bool__(self) -> bool:
        return bool(self.entries)

    def alter(self, entity: Entity, sets: dict[str, float], removals: set[str]) -> None:
        values = self.entries.setdefault(entity, {})
        for key in removals:
            values.pop(key, None)
        values.update(sets)
        if not values:
            del self.entries[entity]
        self.version += 1

    def get(self, entity: Entity, key: str) -> float | None:
        return self.entries.get(entity, {}).get(key)

    def resolve(self, key: str, user: str, client_id: str) -> Resolved | None:
        """The quota for ``key`` of a client, by Kafka's precedence (None: no quota)."""
        if not self.entries:
            return None
        u: tuple[str, str | None] = (USER, user)
        du: tuple[str, str | None] = (USER, None)
        c: tuple[str, str | None] = (CLIENT_ID, client_id)
        dc: tuple[str, str | None] = (CLIENT_ID, None)
        order: list[tuple[Entity, str, str]] = [
            (entity_from_pairs([u, c]), user, client_id),
            (entity_from_pairs([u, dc]), user, client_id),
            ((u,), user, ""),
            (entity_from_pairs([du, c]), user, client_id),
            (entity_from_pairs([du, dc]), user, client_id),
            ((du,), user, ""),
            ((c,), "", client_id),
            ((dc,), "", client_id),
        ]
        for entity, user_tag, client_tag in order:
            limit = self.get(entity, key)
            if limit is not None:
                return Resolved(limit, user_tag, client_tag, entity)
        return None

    def to_json(self) -> list[dict[str, object]]:
        return [{"entity": [[t, n] for t, n in entity], "values": dict(values)}
                for entity, values in self.entries.items()]

    def load_json(self, data: list[dict[str, object]]) -> None:
        for item in data:
            raw = item["entity"]
            values = item["values"]
            assert isinstance(raw, list) and isinstance(values, dict)
            entity = entity_from_pairs([(str(t), None if n is None else str(n)) for t, n in raw])
            self.entries[entity] = {str(k): float(v) for k, v in values.items()}
        self.version += 1
