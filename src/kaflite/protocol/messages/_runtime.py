"""The small runtime every generated message class stands on.

Generated classes are slotted dataclasses with a ``read(reader, version)``
classmethod and a ``write(writer, version)`` method, written out field by
field by ``tools/codegen``. This module supplies what they share: the
``Struct`` base with whole-buffer ``decode``/``encode``, the ``FieldSpec``
description each class carries (used by generic tooling such as the
property-based round-trip tests and JSON views), and tagged-field helpers.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Self, TypeVar

from kaflite.protocol._error_codes import UnsupportedVersionError
from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.primitives import BytesLike, Reader, Writer

__all__ = [
    "FieldSpec",
    "FieldVersionError",
    "Request",
    "Struct",
    "merge_tags",
    "to_bytes",
]


class FieldVersionError(LocalProtocolError, UnsupportedVersionError):
    """A message, or one of its fields, asked for at a version it does not have.

    Both a codec error (``LocalProtocolError``) and Kafka's UNSUPPORTED_VERSION
    (``errors.UnsupportedVersionError``): catching either catches it."""


class FieldSpec(NamedTuple):
    """One schema field, as the generator saw it (``hi`` of -1 means open-ended)."""

    name: str
    type: str                 # element type: int32, string, records, or a struct name
    is_array: bool
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    struct: builtins.type[Struct] | None
    non_flexible: bool        # field-level "flexibleVersions": "none" (header ClientId)


def in_range(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v and (rng[1] < 0 or v <= rng[1])


class Struct:
    """Base of every generated struct and message."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_VERSION: ClassVar[int] = -1  # first flexible version, -1 if never
    unknown_tagged_fields: tuple[tuple[int, bytes], ...]

    @classmethod
    def read(cls, r: Reader, v: int) -> Self:
        raise NotImplementedError

    def write(self, w: Writer, v: int) -> None:
        raise NotImplementedError

    @classmethod
    def check_version(cls, version: int) -> None:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise FieldVersionError(
                f"{cls.__name__} has versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version}"
            )

    @classmethod
    def decode(cls, data: BytesLike, version: int) -> Self:
        """Decode ``data`` entirely; trailing bytes are a protocol error."""
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise RemoteProtocolError(
                f"{cls.__name__} has versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version}"
            )
        r = Reader(data)
        obj = cls.read(r, version)
        if not r.at_end():
            raise RemoteProtocolError(
                f"{r.remaining()} trailing bytes after {cls.__name__} v{version}"
            )
        return obj

    def encode(self, version: int) -> bytes:
        self.check_version(version)
        w = Writer()
        self.write(w, version)
        return w.getvalue()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (bytes as hex, UUIDs as strings)."""
        return {f.name: _plain(getattr(self, f.name)) for f in self.FIELDS}


R_co = TypeVar("R_co", bound=Struct, covariant=True)


class Request(Struct, Generic[R_co]):
    """A request message. Its type parameter is its response's class, so that
    ``connection.request(req)`` is typed end to end (franz-go's ``ResponseKind``)."""

    __slots__ = ()

    API_KEY: ClassVar[int] = -1
    RESPONSE: ClassVar[type[Struct]] = Struct


def _plain(value: object) -> object:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(x) for x in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def to_bytes(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)


def merge_tags(
    known: list[tuple[int, BytesLike]], unknown: Sequence[tuple[int, bytes]]
) -> list[tuple[int, BytesLike]]:
    """Known and unknown tagged fields, in tag order, for writing.

    ``unknown`` also holds known tags that arrived carrying their default value;
    such a raw entry gives way when the field is now written with a real value.
    """
    if not unknown:
        # Schemas may declare tagged fields out of tag order (Kafka's
        # PartitionChangeRecord declares tag 8 before 6 and 7); the wire wants them
        # ascending. ``known`` is the caller's own fresh list.
        if len(known) > 1:
            known.sort(key=lambda t: t[0])
        return known
    written = {tag for tag, _ in known}
    merged: list[tuple[int, BytesLike]] = [*known, *(t for t in unknown if t[0] not in written)]
    merged.sort(key=lambda t: t[0])
    return merged
