"""Bytes as the page shows them: UTF-8 text, else base64, with a JSON flag."""

from __future__ import annotations

import base64
import json

__all__ = ["render_bytes", "search_hit"]


def render_bytes(data: bytes | None) -> dict[str, object] | None:
    if data is None:
        return None
    try:
        text: str | None = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    is_json = False
    if text is not None and text.strip():
        try:
            json.loads(text)
            is_json = True
        except ValueError:
            is_json = False
    return {"text": text, "base64": None if text is not None
            else base64.b64encode(bytes(data)).decode("ascii"),
            "json": is_json, "size": len(data)}


def search_hit(needle: bytes, key: bytes | None, value: bytes | None,
               headers: tuple[tuple[str, bytes | None], ...] | list[tuple[str, bytes | None]]
               ) -> bool:
    """Whether ``needle`` (lower-cased) is in the key, the value or a header, ignoring
    ASCII case."""
    for data in (key, value, *(v for _, v in headers)):
        if data is not None and needle in bytes(data).lower():
            return True
    return any(needle in name.encode("utf-8", "replace").lower() for name, _ in headers)
