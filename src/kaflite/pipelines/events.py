"""The clickstream event: its one shape, for every producer of it and the pipeline.

    {"user": "user-017", "page": "/cart", "action": "click", "amount": 0.0,
     "ts": 1700000000123}

``ts`` is the event time in epoch milliseconds; ``amount`` is non-zero only
for a purchase. The demo's producer (``kaflite.demo.workload``), ``kaflite
produce --generate clickstream`` and the pipeline's schema
(``kaflite.pipelines.clickstream``) all take it from here. Records are keyed
by ``user``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import TypedDict

__all__ = ["ACTIONS", "EVENT_SCHEMA", "PAGES", "USERS", "ClickEvent", "click_event", "encode",
           "generate"]

PAGES = ["/", "/search", "/cart", "/checkout", "/product", "/help", "/account"]
USERS = [f"user-{i:03d}" for i in range(200)]
ACTIONS = ["view", "view", "view", "click", "click", "purchase"]
EVENT_SCHEMA = "user string, page string, action string, amount double, ts long"


class ClickEvent(TypedDict):
    """One event, as the pipeline reads it (``EVENT_SCHEMA``)."""

    user: str
    page: str
    action: str
    amount: float
    ts: int                 # event time, epoch ms


def click_event(rng: random.Random, ts: int) -> ClickEvent:
    """One random event at event time ``ts`` (epoch ms)."""
    action = rng.choice(ACTIONS)
    return {"user": rng.choice(USERS), "page": rng.choice(PAGES), "action": action,
            "amount": round(rng.uniform(1, 80), 2) if action == "purchase" else 0.0,
            "ts": ts}


def generate(count: int, end_ms: int, span_ms: int,
             seed: int | None = None) -> Iterator[ClickEvent]:
    """``count`` events spread evenly over the ``span_ms`` before ``end_ms``, in time order."""
    rng = random.Random(seed)
    for i in range(count):
        yield click_event(rng, end_ms - span_ms + i * span_ms // max(count, 1))


def encode(event: ClickEvent) -> tuple[bytes, bytes]:
    """The record of an event: (key, value), the user and compact JSON."""
    return str(event["user"]).encode(), json.dumps(event, separators=(",", ":")).encode()
