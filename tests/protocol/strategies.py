"""Hypothesis strategies derived from the generated classes' field specs."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from kaflite.protocol.messages._runtime import FieldSpec, Struct, in_range

_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


def _scalar(spec: FieldSpec, v: int, depth: int,
            strings: st.SearchStrategy[str] | None) -> st.SearchStrategy[Any]:
    t = spec.type
    if spec.struct is not None:
        return structs(spec.struct, v, depth + 1, strings)
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.uuids().map(lambda u: uuid.UUID(int=u.int))
    if t == "string":
        return st.text(max_size=12) if strings is None else strings
    return st.binary(max_size=24)


def value(spec: FieldSpec, v: int, depth: int = 0,
          strings: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    elem = _scalar(spec, v, depth, strings)
    strat: st.SearchStrategy[Any]
    strat = st.lists(elem, max_size=0 if depth > 3 else 3) if spec.is_array else elem
    if in_range(spec.nullable, v):
        strat = st.none() | strat
    return strat


def present(spec: FieldSpec, v: int, flexible: bool) -> bool:
    if spec.tag is not None:
        return flexible and in_range(spec.tagged, v)
    return in_range(spec.versions, v)


def unknown_tags(known: set[int]) -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    tag = st.integers(0, 300).filter(lambda t: t not in known)
    return st.lists(st.tuples(tag, st.binary(max_size=8)), max_size=2, unique_by=lambda t: t[0]).map(
        lambda items: tuple(sorted(items))
    )


def structs(cls: type[Struct], v: int, depth: int = 0,
            strings: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """Instances of ``cls`` at version ``v``; ``strings`` draws every string field
    (names the test wants hit, say), instead of arbitrary text."""
    flexible = 0 <= cls.FLEXIBLE_VERSION <= v
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for spec in cls.FIELDS:
        if present(spec, v, flexible):
            kwargs[spec.name] = value(spec, v, depth, strings)
    if flexible:
        kwargs["unknown_tagged_fields"] = unknown_tags(
            {s.tag for s in cls.FIELDS if s.tag is not None}
        )
    return st.builds(cls, **kwargs)
