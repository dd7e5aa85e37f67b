"""The demo's Spark step: the clickstream pipeline (kaflite.spark) on the events topic.

It starts ``kaflite.pipelines.clickstream`` on a local Spark session, reading
``events`` and writing windowed aggregates to ``results``, and at the end checks
the aggregates against a plain Python computation over the acknowledged events.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["SparkStep"]


class SparkStep:
    def __init__(self, bootstrap: str, events: str, results: str, enabled: bool) -> None:
        self.bootstrap = bootstrap
        self.events = events
        self.results = results
        self.enabled = enabled
        self.status = "off (--no-spark)" if not enabled else "starting"
        self._pipeline: Any = None

    def start(self) -> None:
        if not self.enabled:
            return
        try:
            clickstream: Any = importlib.import_module("kaflite.pipelines.clickstream")
        except ImportError as exc:
            self.status = f"unavailable: {exc}"
            return
        self._pipeline = clickstream.start_demo_pipeline(
            bootstrap=self.bootstrap, events_topic=self.events, results_topic=self.results)
        self.status = "running"

    def finish(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.enabled:
            return {"ok": True, "detail": "Spark off (--no-spark)"}
        if self._pipeline is None:
            return {"ok": False, "detail": self.status}
        ok, detail = self._pipeline.verify(events)
        self.status = "verified" if ok else "mismatch"
        return {"ok": ok, "detail": detail}

    def stop(self) -> None:
        if self._pipeline is not None:
            self._pipeline.stop()
            self._pipeline = None
