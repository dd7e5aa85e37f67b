"""How a cluster process collects its garbage: full collections scan what is new.

A broker's long-lived objects grow with its partitions: every replica is a
``Partition``, its log, segments, indexes, producer state, follower states, each
with its dicts, sets and deques. At 20,000 partitions (60,000 replicas in one
process) that is millions of objects the cyclic collector tracks. CPython (3.11)
runs a full collection whenever the objects promoted to its oldest generation since
the last one reach a quarter of those that survived it, and a full collection walks
them all: 0.3-1.2 s on the event loop every three brokers share. A broker's restart
makes a third of the replicas anew, which set off twelve such collections in one
crash-and-return of ``benchmarks/cluster_scale.py`` (docs/benchmarks.md).

``install()`` changes that policy in a process that runs a cluster:

- After each full collection the survivors are frozen (``gc.freeze()``): later
  collections leave them out. A full collection then walks only what was promoted
  since the last one, so its cost follows the rate of change, not the cluster's size.
- Frozen objects are still freed by reference counting; only a cycle among them that
  becomes garbage waits. When the objects frozen since the last thaw reach
  ``THAW_RATIO`` times the heap that thaw found alive, they are all unfrozen and the
  next full collection walks everything once, which reclaims such cycles. So the
  memory held by dead cycles stays below ``THAW_RATIO`` times the live heap (CPython's
  own rule holds it below a quarter), and a heap walk happens each time the heap may
  have doubled, not each time it grew by a quarter.

``KAFLITE_GC=cpython`` leaves CPython's policy alone (to compare, in benchmarks).
Only processes kaflite owns install it (``kaflite up``, broker processes, the verify
harness's cluster): a library's embedded ``Cluster`` does not change its host's
collector.
"""

from __future__ import annotations

import gc
import os
from typing import Any

__all__ = ["ENV", "THAW_RATIO", "FreezingCollector", "install"]

ENV = "KAFLITE_GC"
THAW_RATIO = 1.0


class FreezingCollector:
    """The ``gc.callbacks`` entry of the policy above; its counters are for tests and
    benchmarks."""

    def __init__(self, thaw_ratio: float = THAW_RATIO) -> None:
        self.thaw_ratio = thaw_ratio
        self.live_after_thaw = 0     # objects alive after the last walk of everything
        self.frozen_since_thaw = 0   # objects frozen since then (an upper bound)
        self.thawing = True          # the next full collection walks everything
        self.freezes = 0
        self.thaws = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        # Inside the collector's callback no collection can start, and what
        # get_objects lists is what this collection just walked: the unfrozen survivors.
        survivors = len(gc.get_objects(generation=2))
        if self.thawing:
            self.thawing = False
            self.live_after_thaw = survivors
            self.frozen_since_thaw = 0
        self.frozen_since_thaw += survivors
        gc.freeze()
        self.freezes += 1
        if self.frozen_since_thaw > self.thaw_ratio * max(self.live_after_thaw, 1) \
                + self.live_after_thaw:
            # everything back into the oldest generation: the next full collection
            # walks it all once (and finds the dead cycles)
            gc.unfreeze()
            self.thawing = True
            self.thaws += 1


_installed: FreezingCollector | None = None


def install() -> FreezingCollector | None:
    """Use the freezing policy in this process (once; None with ``KAFLITE_GC=cpython``)."""
    global _installed
    if os.environ.get(ENV, "").lower() == "cpython":
        return None
    if _installed is None:
        _installed = FreezingCollector()
        gc.callbacks.append(_installed)
    return _installed
