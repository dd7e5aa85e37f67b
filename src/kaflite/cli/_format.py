"""kcat-style formats for ``kaflite produce`` and ``kaflite consume``.

Tokens: ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key, ``%s``
value, ``%K`` key size, ``%S`` value size, ``%T`` timestamp (ms), ``%h``
headers as ``k=v,k=v``, ``%%`` a percent sign; escapes ``\\n``, ``\\t``, ``\\r``, ``\\\\``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:   # (the CLI imports the client only when a command runs)
    from kaflite.client import ConsumerRecord

__all__ = ["compile_format"]

Piece: TypeAlias = "str | Callable[[ConsumerRecord], str]"


def _text(b: bytes | memoryview | None) -> str:
    return "" if b is None else bytes(b).decode("utf-8", "replace")


def _headers(headers: Sequence[tuple[str, bytes | None]] | None) -> str:
    return ",".join(f"{k}={_text(v)}" for k, v in (headers or []))


TOKENS: dict[str, Callable[[ConsumerRecord], str]] = {
    "t": lambda r: r.topic,
    "p": lambda r: str(r.partition),
    "o": lambda r: str(r.offset),
    "k": lambda r: _text(r.key),
    "s": lambda r: _text(r.value),
    "K": lambda r: str(-1 if r.key is None else len(r.key)),
    "S": lambda r: str(-1 if r.value is None else len(r.value)),
    "T": lambda r: str(r.timestamp),
    "h": lambda r: _headers(r.headers),
}
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def compile_format(fmt: str) -> Callable[[ConsumerRecord], str]:
    """A function rendering one record with ``fmt``; unknown tokens are an error."""
    pieces: list[Piece] = []
    literal = ""
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch in "%\\" and i + 1 < len(fmt):
            nxt = fmt[i + 1]
            if ch == "%" and nxt == "%":
                literal += "%"
            elif ch == "%":
                if nxt not in TOKENS:
                    raise ValueError(f"unknown format token %{nxt}")
                pieces.append(literal)
                literal = ""
                pieces.append(TOKENS[nxt])
            else:
                literal += ESCAPES.get(nxt, "\\" + nxt)
            i += 2
            continue
        literal += ch
        i += 1
    pieces.append(literal)

    def render(record: ConsumerRecord) -> str:
        return "".join(p if isinstance(p, str) else p(record) for p in pieces)

    return render
