"""The cluster process's collector policy (kaflite.cluster.gc_policy), each case in a
fresh interpreter: the policy is process-wide, and pytest's own process keeps CPython's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_full_collection_freezes_its_survivors_and_the_next_walks_only_new_ones() -> None:
    out = _run("""
        import gc
        from kaflite.cluster import gc_policy
        policy = gc_policy.install()
        old = [[i] for i in range(200_000)]      # long-lived (lists are tracked)
        gc.collect()
        assert policy.freezes >= 1 and gc.get_freeze_count() >= 200_000, gc.get_freeze_count()
        assert len(gc.get_objects(generation=2)) == 0
        new = [[i] for i in range(1_000)]
        walked = []
        gc.callbacks.insert(0, lambda phase, info: walked.append(
            len(gc.get_objects(generation=2))) if phase == "stop" else None)
        gc.collect()
        # the second full collection walked the new objects, not the 200,000 frozen ones
        assert walked and walked[-1] < 10_000, walked
        print("ok", len(old), len(new))
    """)
    assert out.startswith("ok")


def test_a_cycle_that_dies_frozen_is_reclaimed_once_the_heap_doubles() -> None:
    """Frozen objects are never walked; a dead cycle among them is found when enough has
    been frozen since the last walk of everything: memory is not pinned for good."""
    out = _run("""
        import gc, weakref
        from kaflite.cluster import gc_policy
        policy = gc_policy.install()

        class Node:
            pass

        live = [[i] for i in range(50_000)]
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        gc.collect()                  # the cycle survives, and is frozen
        del a, b
        gc.collect()
        assert gone() is not None     # dead, but frozen: not walked
        kept = []
        rounds = 0
        while gone() is not None and rounds < 100:
            kept.append([[j] for j in range(10_000)])   # the heap grows
            gc.collect()
            rounds += 1
        assert gone() is None, (policy.thaws, policy.frozen_since_thaw, policy.live_after_thaw)
        assert policy.thaws >= 1
        print("ok", rounds)
    """)
    assert out.startswith("ok")


@pytest.mark.parametrize("value", ["cpython", "CPython"])
def test_kaflite_gc_cpython_keeps_the_default_policy(value: str) -> None:
    out = _run("""
        import gc
        from kaflite.cluster import gc_policy
        assert gc_policy.install() is None
        gc.collect()
        assert gc.get_freeze_count() == 0
        print("ok")
    """, KAFLITE_GC=value)
    assert out.startswith("ok")
