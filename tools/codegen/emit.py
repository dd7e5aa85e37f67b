"""Emit one Python module per schema: slotted dataclasses with read/write.

The emitted code is straight-line, version-conditional Python (in the style of
franz-go's kmsg): one ``read`` classmethod and one ``write`` method per struct,
covering every version. Flexibility (compact encodings and tagged sections) and
nullability are resolved per field into either a constant branch or a single
version comparison, so the common path does no table lookups at all.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.codegen.schema import NONE, Field, Message, Struct, Versions, snake

INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32"}

Flag = bool | str  # True, False, or a Python condition on ``v``


def cond(rng: Versions, within: Versions) -> Flag:
    """A condition on ``v`` that is true for versions in ``rng``, for ``v`` in ``within``."""
    eff = rng.intersect(within)
    if eff.empty:
        return False
    if rng.covers(within):
        return True
    parts = []
    if eff.lo > within.lo:
        parts.append(f"v >= {eff.lo}")
    if eff.hi is not None and (within.hi is None or eff.hi < within.hi):
        parts.append(f"v <= {eff.hi}")
    if not parts:
        return True
    if len(parts) == 2:
        return f"{eff.lo} <= v <= {eff.hi}"
    return parts[0]


def split(rng: Versions, ctx: Versions) -> tuple[Flag, Versions, Versions]:
    """The condition for ``rng`` within ``ctx``, and ``ctx`` narrowed to each side of it."""
    flag = cond(rng, ctx)
    inside = rng.intersect(ctx)
    if rng.empty:
        outside = ctx
    elif rng.hi is None:
        outside = ctx.intersect(Versions(0, rng.lo - 1))
    else:
        outside = ctx  # not an "N+" range: keep the wider context
    return flag, inside, outside


def pick(flag: Flag, make: Callable[[bool], str]) -> str:
    """An expression that is ``make(True)`` when ``flag`` holds, else ``make(False)``."""
    if flag is True:
        return make(True)
    if flag is False:
        return make(False)
    a, b = make(True), make(False)
    return a if a == b else f"({a} if {flag} else {b})"


def blocks(flag: Flag, make: Callable[[bool], list[str]]) -> list[str]:
    """Statements ``make(True)`` when ``flag`` holds, else ``make(False)``."""
    if flag is True:
        return make(True)
    if flag is False:
        return make(False)
    a, b = make(True), make(False)
    if a == b:
        return a
    return [f"if {flag}:", *indent(a), "else:", *indent(b)]


def indent(lines: list[str], n: int = 1) -> list[str]:
    pad = "    " * n
    return [pad + line if line else line for line in lines]


class StructEmitter:
    def __init__(self, msg: Message, st: Struct) -> None:
        self.msg = msg
        self.st = st
        self.valid = msg.valid

    # -- per-field facts -----------------------------------------------------
    def present(self, f: Field) -> Versions:
        """Versions in which the field is written outside the tagged section."""
        return NONE if f.tag is not None else f.versions

    def flex(self, f: Field) -> Flag:
        if f.flexible_override is not None:
            return cond(f.flexible_override, self.valid)
        return cond(self.msg.flexible, self.valid)

    def nullable(self, f: Field) -> Flag:
        return cond(f.nullable, self.valid)

    def default(self, f: Field) -> str:
        d = f.default
        if f.is_array:
            return "None" if d == "null" else "[]"
        if f.struct is not None:
            return "None" if d == "null" else f"{f.struct.name}()"
        t = f.type
        if t in INT_TYPES:
            return str(int(d, 0)) if d not in (None, "") else "0"
        if t == "float64":
            return repr(float(d)) if d else "0.0"
        if t == "bool":
            return "True" if d == "true" else "False"
        if t == "string":
            return "None" if d == "null" else repr(d or "")
        if t == "uuid":
            return "ZERO_UUID"
        if t in ("bytes", "records"):
            if d == "null" or (t == "records" and not f.nullable.empty):
                return "None"
            return 'b""'
        raise ValueError(f"no default for {f.type}")

    def annotation(self, f: Field) -> str:
        t = f.type
        if f.struct is not None:
            base = f.struct.name
        elif t in INT_TYPES:
            base = "int"
        elif t == "float64":
            base = "float"
        elif t == "bool":
            base = "bool"
        elif t == "string":
            base = "str"
        elif t == "uuid":
            base = "uuid.UUID"
        else:
            base = "BytesLike"
        if f.is_array:
            base = f"list[{base}]"
        if not f.nullable.empty or self.default(f) == "None":
            base = f"{base} | None"
        return base

    # -- reading ---------------------------------------------------------------
    def elem_read(self, f: Field, r: str, flex: bool, null: bool, tagged: bool = False) -> str:
        t = f.type
        if f.struct is not None:
            body = f"{f.struct.name}.read({r}, v)"
            if null:
                marker = f"{r}.uvarint() == 0" if tagged else f"{r}.int8() < 0"
                return f"(None if {marker} else {body})"
            return body
        if t in INT_TYPES or t in ("float64", "bool", "uuid"):
            return f"{r}.{t}()"
        if t == "string":
            name = ("compact_" if flex else "") + ("nullable_string" if null else "string")
            return f"{r}.{name}()"
        name = ("compact_" if flex else "") + ("nullable_bytes_view" if null else "bytes_view")
        expr = f"{r}.{name}()"
        if t == "bytes" and not f.zero_copy:
            return f"to_bytes({expr})" if null else f"bytes({expr})"
        return expr

    def flex_split(self, f: Field, ctx: Versions, tagged: bool) -> tuple[Flag, Versions, Versions]:
        if tagged:
            return True, ctx, ctx
        rng = f.flexible_override if f.flexible_override is not None else self.msg.flexible
        return split(rng, ctx)

    def read_stmts(self, f: Field, r: str, var: str, ctx: Versions, tagged: bool = False) -> list[str]:
        flex, fin, fout = self.flex_split(f, ctx, tagged)

        def null_of(fx: bool) -> Flag:
            return cond(f.nullable, fin if fx else fout)

        if not f.is_array:
            expr = pick(flex, lambda fx: pick(
                null_of(fx), lambda nl: self.elem_read(f, r, fx, nl, tagged)))
            return [f"{var} = {expr}"]

        def count(fx: bool, nl: bool) -> str:
            return f"{r}." + ("compact_" if fx else "") + ("nullable_array_len" if nl else "array_len") + "()"

        def items(fx: bool) -> str:
            if f.type == "int32" and f.struct is None:
                return f"{r}.int32_array(n)"
            return f"[{self.elem_read(f, r, fx, False)} for _ in range(n)]"

        lines = [f"n = {pick(flex, lambda fx: pick(null_of(fx), lambda nl: count(fx, nl)))}"]
        list_expr = pick(flex, items)
        if f.nullable.intersect(ctx).empty:
            lines.append(f"{var} = {list_expr}")
        else:
            lines.append(f"{var} = None if n < 0 else {list_expr}")
        return lines

    def emit_read(self) -> list[str]:
        st = self.st
        out = ["@classmethod", f"def read(cls, r: Reader, v: int) -> {st.name}:"]
        body: list[str] = []
        tagged_fields = [f for f in st.fields if f.tag is not None]
        for f in st.fields:
            var = f"f_{f.name}"
            if f.tag is not None:
                body.append(f"{var}: {self.annotation(f)} = {self.default(f)}")
                continue
            c = cond(self.present(f), self.valid)
            ctx = self.present(f).intersect(self.valid)
            if c is True:
                body += self.read_stmts(f, "r", var, ctx)
            elif c is False:
                body.append(f"{var} = {self.default(f)}")
            else:
                body += [f"if {c}:", *indent(self.read_stmts(f, "r", var, ctx)),
                         "else:", f"    {var} = {self.default(f)}"]
        body.append("unknown: tuple[tuple[int, bytes], ...] = ()")
        flex = cond(self.msg.flexible, self.valid)
        if flex is not False:
            loop = ["for tag, data in r.tagged_fields():"]
            branch = "if"
            for f in tagged_fields:
                tc = cond(f.tagged, self.valid)
                test = f"tag == {f.tag}" + ("" if tc is True else f" and {tc}")
                # A tagged field sent with its default value (Kafka omits those,
                # some brokers do not) is also kept raw, so re-encoding is exact.
                d = self.default(f)
                same = f"f_{f.name} is None" if d == "None" else f"f_{f.name} == {d}"
                loop += indent([f"{branch} {test}:",
                                "    tr = Reader(data)",
                                *indent(self.read_stmts(f, "tr", f"f_{f.name}", f.tagged.intersect(self.valid), tagged=True)),
                                f"    if {same}:",
                                "        unknown += ((tag, bytes(data)),)"])
                branch = "elif"
            unknown = "unknown += ((tag, bytes(data)),)"
            loop += indent([unknown] if branch == "if" else ["else:", "    " + unknown])
            body += loop if flex is True else [f"if {flex}:", *indent(loop)]
        args = ", ".join([f"f_{f.name}" for f in st.fields] + ["unknown"])
        body.append(f"return cls({args})")
        return out + indent(body)

    # -- writing ---------------------------------------------------------------
    def elem_write(self, f: Field, w: str, x: str, flex: bool, null: bool,
                   tagged: bool = False) -> list[str]:
        t = f.type
        if f.struct is not None:
            if not null:
                return [f"{x}.write({w}, v)"]
            marker_null = f"{w}.uvarint(0)" if tagged else f"{w}.int8(-1)"
            marker_set = f"{w}.uvarint(1)" if tagged else f"{w}.int8(1)"
            return [f"if {x} is None:", f"    {marker_null}", "else:",
                    f"    {marker_set}", f"    {x}.write({w}, v)"]
        if t in INT_TYPES or t in ("float64", "bool", "uuid"):
            return [f"{w}.{t}({x})"]
        kind = "string" if t == "string" else "bytes"
        name = ("compact_" if flex else "") + ("nullable_" if null else "") + kind
        return [f"{w}.{name}({x})"]

    def write_stmts(self, f: Field, w: str, x: str, ctx: Versions, tagged: bool = False) -> list[str]:
        flex, fin, fout = self.flex_split(f, ctx, tagged)

        def null_of(fx: bool) -> Flag:
            return cond(f.nullable, fin if fx else fout)

        if not f.is_array:
            return blocks(flex, lambda fx: blocks(
                null_of(fx), lambda nl: self.elem_write(f, w, x, fx, nl, tagged)))

        def arr(fx: bool, nl: bool) -> list[str]:
            length = f"{w}.compact_array_len" if fx else f"{w}.array_len"
            if f.type == "int32" and f.struct is None:
                items = [f"{w}.int32_array({x})"]
            else:
                e = f"e_{f.name}"
                items = [f"for {e} in {x}:", *indent(self.elem_write(f, w, e, fx, False))]
            if nl:
                return [f"if {x} is None:", f"    {length}(-1)", "else:",
                        f"    {length}(len({x}))", *indent(items)]
            if self.annotation(f).endswith("| None"):
                return [f"if {x} is None:",
                        f"    raise LocalProtocolError(\"{self.st.name}.{f.name} may not be null at version \" + str(v))",
                        f"{length}(len({x}))", *items]
            return [f"{length}(len({x}))", *items]

        return blocks(flex, lambda fx: blocks(null_of(fx), lambda nl: arr(fx, nl)))

    def is_default_test(self, f: Field, x: str) -> str | None:
        """An expression true when ``x`` holds a non-default value (None: can't tell cheaply)."""
        d = self.default(f)
        if f.is_array:
            return f"{x} is not None" if d == "None" else f"bool({x})"
        if f.struct is not None:
            return f"{x} is not None" if d == "None" else f"{x} != {d}"
        if d == "None":
            return f"{x} is not None"
        return f"{x} != {d}"

    def emit_write(self) -> list[str]:
        st = self.st
        body: list[str] = []
        for f in st.fields:
            if f.tag is not None:
                continue
            x = f"self.{f.name}"
            c = cond(self.present(f), self.valid)
            stmts = self.write_stmts(f, "w", x, self.present(f).intersect(self.valid))
            check = None
            if not f.ignorable:
                test = self.is_default_test(f, x)
                if test is not None:
                    check = [f"elif {test}:",
                             f"    raise FieldVersionError("
                             f"f\"{st.name}.{f.name} is not supported at version {{v}}\")"]
            if c is True:
                body += stmts
            elif c is False:
                if check:
                    body += [f"if {check[0][5:]}", check[1]]
            else:
                body += [f"if {c}:", *indent(stmts), *(check or [])]
        flex = cond(self.msg.flexible, self.valid)
        if flex is not False:
            tagged_fields = [f for f in st.fields if f.tag is not None]
            if not tagged_fields:
                sec = ["w.tagged_fields(self.unknown_tagged_fields)"]
            else:
                sec = ["tags: list[tuple[int, BytesLike]] = []"]
                for f in tagged_fields:
                    x = f"self.{f.name}"
                    tc = cond(f.tagged, self.valid)
                    test = self.is_default_test(f, x) or "True"
                    full = test if tc is True else f"{tc} and {test}"
                    sec += [f"if {full}:", "    tw = Writer()",
                            *indent(self.write_stmts(f, "tw", x, f.tagged.intersect(self.valid), tagged=True)),
                            f"    tags.append(({f.tag}, tw.getvalue()))"]
                sec.append("w.tagged_fields(merge_tags(tags, self.unknown_tagged_fields))")
            body += sec if flex is True else [f"if {flex}:", *indent(sec)]
        if not body:
            body = ["pass"]
        return ["def write(self, w: Writer, v: int) -> None:", *indent(body)]

    # -- class -----------------------------------------------------------------
    def emit(self) -> list[str]:
        st = self.st
        response = response_of(self.msg) if st is self.msg.top else None
        base = f"Request[{response}]" if response else "Struct"
        lines = ["@dataclass(slots=True)", f"class {st.name}({base}):"]
        body: list[str] = []
        if st is self.msg.top and self.msg.api_key is not None:
            body.append(f"API_KEY: ClassVar[int] = {self.msg.api_key}")
        if response:
            body.append(f"RESPONSE: ClassVar[type[Struct]] = {response}")
        body += [
            f"MIN_VERSION: ClassVar[int] = {self.valid.lo}",
            f"MAX_VERSION: ClassVar[int] = {self.valid.hi}",
            f"FLEXIBLE_VERSION: ClassVar[int] = "
            f"{-1 if self.msg.flexible.empty else self.msg.flexible.lo}",
            "",
        ]
        for f in st.fields:
            d = self.default(f)
            if d == "[]":
                d = "field(default_factory=list)"
            elif f.struct is not None and d != "None":
                d = f"field(default_factory={f.struct.name})"
            body.append(f"{f.name}: {self.annotation(f)} = {d}")
        body.append("unknown_tagged_fields: tuple[tuple[int, bytes], ...] = ()")
        body.append("")
        body += self.emit_read()
        body.append("")
        body += self.emit_write()
        return lines + indent(body)

    def emit_fields(self) -> str:
        specs = []
        for f in self.st.fields:
            def rng(r: Versions) -> str:
                return "None" if r.empty else f"({r.lo}, {-1 if r.hi is None else r.hi})"
            specs.append(
                f"    FieldSpec({f.name!r}, {f.type!r}, {f.is_array}, "
                f"{rng(f.versions.intersect(self.valid))}, {rng(f.nullable)}, "
                f"{rng(f.tagged)}, {f.tag}, {f.struct.name if f.struct else None}, "
                f"{f.flexible_override is not None and f.flexible_override.empty}),"
            )
        if not specs:
            return f"{self.st.name}.FIELDS = ()"
        return f"{self.st.name}.FIELDS = (\n" + "\n".join(specs) + "\n)"


HEADER = '''"""Generated by tools/codegen from {source}. Do not edit.

Regenerate with ``python -m tools.codegen``.
"""
# ruff: noqa
# fmt: off
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kaflite.protocol.messages._runtime import (
    FieldSpec, FieldVersionError, Request, Struct, merge_tags, to_bytes,
)
from kaflite.protocol._exceptions import LocalProtocolError
from kaflite.protocol.primitives import ZERO_UUID, BytesLike, Reader, Writer

__all__ = {names!r}
'''


def response_of(msg: Message) -> str | None:
    """A request's response class (every Kafka request has one, named alike)."""
    if msg.kind != "request" or not msg.name.endswith("Request"):
        return None
    return msg.name[: -len("Request")] + "Response"


def emit_module(msg: Message) -> str:
    names = [s.name for s in msg.structs] + [msg.top.name]
    parts = [HEADER.format(source=msg.source, names=sorted(names))]
    response = response_of(msg)
    if response:
        parts.append(f"from kaflite.protocol.messages._generated.{snake(response)} "
                     f"import {response}\n")
    emitters = [StructEmitter(msg, s) for s in [*msg.structs, msg.top]]
    for em in emitters:
        parts.append("\n\n" + "\n".join(em.emit()) + "\n")
    parts.append("\n\n" + "\n".join(em.emit_fields() for em in emitters) + "\n")
    return "".join(parts)
