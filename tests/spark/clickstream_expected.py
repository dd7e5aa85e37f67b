"""What the clickstream pipeline must emit, computed in plain Python (no Spark needed)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

WINDOW_MS = 60_000
WATERMARK_MS = 60_000


def expected(evts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What append mode must emit: every window the watermark has passed, by page|start."""
    watermark = max(e["ts"] for e in evts) - WATERMARK_MS
    acc: dict[tuple[str, int], dict[str, Any]] = defaultdict(
        lambda: {"events": 0, "views": 0, "clicks": 0, "purchases": 0, "revenue": 0.0})
    for e in evts:
        start = e["ts"] // WINDOW_MS * WINDOW_MS
        a = acc[(e["page"], start)]
        a["events"] += 1
        a["views"] += e["action"] == "view"
        a["clicks"] += e["action"] == "click"
        a["purchases"] += e["action"] == "purchase"
        a["revenue"] += e["amount"] if e["action"] == "purchase" else 0.0
    out = {}
    for (page, start), a in acc.items():
        if start + WINDOW_MS <= watermark:
            out[f"{page}|{start}"] = {"page": page, "window_start": start,
                                      "window_end": start + WINDOW_MS, **a,
                                      "revenue": round(a["revenue"], 2)}
    return out
