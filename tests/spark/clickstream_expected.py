"""What the clickstream pipeline must emit, computed in plain Python (no Spark needed):
the demo's ``expected_windows`` with the pipeline's window and watermark."""

from __future__ import annotations

from typing import Any, cast

from kaflite.demo.spark_step import expected_windows
from kaflite.pipelines.events import ClickEvent

WINDOW_MS = 60_000
WATERMARK_MS = 60_000


def expected(evts: list[dict[str, Any]]) -> dict[str, Any]:
    """What append mode must emit: every window the watermark has passed, by page|start."""
    watermark = max(e["ts"] for e in evts) - WATERMARK_MS
    return dict(expected_windows(cast(list[ClickEvent], evts), watermark, WINDOW_MS))
