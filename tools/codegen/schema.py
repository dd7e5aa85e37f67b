"""Parse Kafka's JSON message schemas into a small typed model for the emitter.

Only the facts a codec needs are kept: names, types, version ranges (valid,
flexible, nullable, tagged), tags, defaults and the ``zeroCopy`` hint. The
schemas' ``about`` texts and comments are deliberately dropped.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
    "bool", "uuid", "string", "bytes", "records",
}


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``hi`` is None for "N+"; empty when lo > hi."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            a, b = text.split("-")
            return cls(int(a), int(b))
        v = int(text)
        return cls(v, v)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def contains(self, v: int) -> bool:
        return not self.empty and v >= self.lo and (self.hi is None or v <= self.hi)

    def intersect(self, other: Versions) -> Versions:
        if self.empty or other.empty:
            return NONE
        lo = max(self.lo, other.lo)
        if self.hi is None:
            hi = other.hi
        elif other.hi is None:
            hi = self.hi
        else:
            hi = min(self.hi, other.hi)
        return Versions(lo, hi) if hi is None or lo <= hi else NONE

    def covers(self, other: Versions) -> bool:
        """True if every version of ``other`` is in this range."""
        if other.empty:
            return True
        if self.empty or other.lo < self.lo:
            return False
        if self.hi is None:
            return True
        return other.hi is not None and other.hi <= self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


@dataclass
class Field:
    name: str              # snake_case Python attribute
    kafka_name: str        # the schema's CamelCase name
    type: str              # element type for arrays, e.g. "int32" or a struct name
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: str | None    # raw schema default, if any
    ignorable: bool
    flexible_override: Versions | None  # field-level "flexibleVersions"
    zero_copy: bool
    struct: Struct | None = None

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Message:
    name: str               # e.g. "MetadataRequest"
    kind: str               # request | response | header | data
    api_key: int | None
    valid: Versions
    flexible: Versions
    structs: list[Struct]   # every struct, nested ones first (definition order)
    top: Struct
    source: str             # schema file name
    latest_unstable: bool


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    out = s.lower()
    return out + "_" if keyword.iskeyword(out) else out


def load_json(path: Path) -> dict[str, object]:
    text = path.read_text()
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    data: dict[str, object] = json.loads(text)
    return data


def parse(path: Path) -> Message:
    raw = load_json(path)
    name = str(raw["name"])
    valid = Versions.parse(str(raw["validVersions"]))
    flexible = Versions.parse(str(raw.get("flexibleVersions", "none")))
    structs: list[Struct] = []
    common: dict[str, Struct] = {}
    common_raw = raw.get("commonStructs", [])
    assert isinstance(common_raw, list)
    # Common structs may reference each other; declare first, fill after.
    for cs in common_raw:
        common[cs["name"]] = Struct(cs["name"])
    for cs in common_raw:
        common[cs["name"]].fields = [_field(f, common, structs, valid) for f in cs["fields"]]
        structs.append(common[cs["name"]])
    top = Struct(name)
    fields_raw = raw["fields"]
    assert isinstance(fields_raw, list)
    top.fields = [_field(f, common, structs, valid) for f in fields_raw]
    api_key = raw.get("apiKey")
    return Message(
        name=name,
        kind=str(raw["type"]),
        api_key=int(api_key) if isinstance(api_key, int) else None,
        valid=valid,
        flexible=flexible,
        structs=_ordered(structs, top),
        top=top,
        source=path.name,
        latest_unstable=bool(raw.get("latestVersionUnstable", False)),
    )


def _field(raw: dict[str, object], common: dict[str, Struct], out: list[Struct],
           valid: Versions) -> Field:
    type_text = str(raw["type"])
    is_array = type_text.startswith("[]")
    elem = type_text[2:] if is_array else type_text
    tagged = Versions.parse(raw.get("taggedVersions"))  # type: ignore[arg-type]
    versions_text = raw.get("versions")
    versions = Versions.parse(versions_text) if versions_text is not None else tagged  # type: ignore[arg-type]
    fo = raw.get("flexibleVersions")
    f = Field(
        name=snake(str(raw["name"])),
        kafka_name=str(raw["name"]),
        type=elem,
        is_array=is_array,
        versions=versions.intersect(valid),
        nullable=Versions.parse(raw.get("nullableVersions")),  # type: ignore[arg-type]
        tagged=tagged,
        tag=int(raw["tag"]) if "tag" in raw else None,  # type: ignore[call-overload]
        default=_default(raw),
        ignorable=bool(raw.get("ignorable", False)),
        flexible_override=Versions.parse(fo) if fo is not None else None,  # type: ignore[arg-type]
        zero_copy=bool(raw.get("zeroCopy", False)),
    )
    if elem not in PRIMITIVES:
        sub = raw.get("fields")
        if sub is not None:
            assert isinstance(sub, list)
            st = Struct(elem)
            st.fields = [_field(x, common, out, valid) for x in sub]
            out.append(st)
            f.struct = st
        else:
            f.struct = common[elem]
    return f


def _default(raw: dict[str, object]) -> str | None:
    if "default" not in raw:
        return None
    d = raw["default"]
    if d is None:
        return "null"
    if isinstance(d, bool):
        return "true" if d else "false"
    return str(d)


def _ordered(structs: list[Struct], top: Struct) -> list[Struct]:
    """Structs in an order where each is defined after the ones it uses."""
    seen: set[str] = set()
    order: list[Struct] = []

    def visit(s: Struct) -> None:
        if s.name in seen:
            return
        seen.add(s.name)
        for f in s.fields:
            if f.struct is not None:
                visit(f.struct)
        order.append(s)

    for s in structs:
        visit(s)
    return order


def load_all(directory: Path) -> list[Message]:
    return [parse(p) for p in sorted(directory.glob("*.json"))]
