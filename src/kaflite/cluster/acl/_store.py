"""The ACL bindings of a cluster, indexed for the authorizer.

The controller owns one ``AclStore`` (persisted with the rest of its metadata,
as KRaft keeps ``AccessControlEntryRecord``s in its log); every broker's
authorizer reads it, so a change applies on every broker at once. Each change
bumps ``version``, which is how authorizers know to drop their caches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kaflite.security.acl import (
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourceType,
)

__all__ = ["AclStore"]


class _TypeIndex:
    """The bindings of one resource type: literal ones by name, prefixed ones in a list."""

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: list[AclBinding] = []

    def add(self, b: AclBinding) -> None:
        if b.pattern_type == PatternType.LITERAL:
            self.literal.setdefault(b.name, []).append(b)
        else:
            self.prefixed.append(b)

    def remove(self, b: AclBinding) -> None:
        if b.pattern_type == PatternType.LITERAL:
            rows = self.literal.get(b.name, [])
            rows.remove(b)
            if not rows:
                del self.literal[b.name]
        else:
            self.prefixed.remove(b)

    def matching(self, name: str) -> Iterator[AclBinding]:
        """The bindings that apply to resource ``name``: its literal name, the literal
        wildcard and every prefix of it."""
        yield from self.literal.get(name, ())
        if name != WILDCARD:
            yield from self.literal.get(WILDCARD, ())
        for b in self.prefixed:
            if name.startswith(b.name):
                yield b


class AclStore:
    def __init__(self) -> None:
        self._bindings: dict[AclBinding, None] = {}     # an ordered set
        self._index: dict[ResourceType, _TypeIndex] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(list(self._bindings))

    def __contains__(self, b: object) -> bool:
        return b in self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Add (validated) bindings; one already there is left as it is, as in Kafka."""
        for b in bindings:
            if b not in self._bindings:
                self._bindings[b] = None
                self._index.setdefault(b.resource_type, _TypeIndex()).add(b)
        self.version += 1

    def remove(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every binding each filter matches; per filter, the ones it deleted."""
        out = []
        for f in filters:
            gone = [b for b in self._bindings if f.matches(b)]
            for b in gone:
                del self._bindings[b]
                self._index[b.resource_type].remove(b)
            out.append(gone)
        self.version += 1
        return out

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if f.matches(b)]

    def matching(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        index = self._index.get(resource_type)
        return index.matching(name) if index is not None else iter(())

    def of_type(self, resource_type: ResourceType) -> Iterator[AclBinding]:
        index = self._index.get(resource_type)
        if index is None:
            return
        for rows in index.literal.values():
            yield from rows
        yield from index.prefixed

    # -- persistence (the controller's JSON) ----------------------------------------------
    def to_json(self) -> list[list[str]]:
        return [b.to_json() for b in self._bindings]

    def load(self, rows: Iterable[list[str]]) -> None:
        self.add(AclBinding.from_json(row) for row in rows)
