"""Java ``.properties`` files, as Kafka's ``server.properties`` and client configs.

The rules are java.util.Properties.load's: ``#`` and ``!`` start a comment line;
a key ends at the first unescaped ``=``, ``:`` or whitespace; a line ending in
an odd number of backslashes continues on the next (whose leading whitespace is
dropped); ``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX`` and ``\\<char>`` are escapes.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_properties", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u":
                code = text[i + 2:i + 6]
                if len(code) != 4 or any(c not in "0123456789abcdefABCDEF" for c in code):
                    raise ValueError(f"malformed \\u escape: \\u{code}")
                out.append(chr(int(code, 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a properties text; a later key wins, as in Java."""
    return dict(_split(line) for line in _logical_lines(text))


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a properties file (UTF-8; Java 9+ reads them so too)."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))
