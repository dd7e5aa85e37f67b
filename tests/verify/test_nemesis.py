"""The nemesis schedule (pure): one seed, one schedule; data-safety rules hold by construction."""

from __future__ import annotations

import random

import pytest

from kaflite.cluster.faults import api_key_of
from kaflite.protocol.errors import code_named
from kaflite.verify.nemesis import (
    BROKER_DOWN,
    ERROR_MENU,
    KINDS,
    MAX_ACTIVE,
    REJOIN_PAUSE,
    Step,
    Targets,
    plan,
)

TARGETS = Targets({"queue": 4}, ("g",), ("tx-0",))


def schedule(seed: int, seconds: float = 120, kinds: tuple[str, ...] = KINDS) -> list[Step]:
    return plan(random.Random(seed), kinds, seconds, TARGETS)


def overlap(a: Step, b: Step, margin: float = 0.0) -> bool:
    return a.at < b.end + margin and b.at < a.end + margin


@pytest.mark.parametrize("seed", [1, 2, 3, 42, 1234])
def test_a_seed_names_one_schedule(seed: int) -> None:
    assert schedule(seed) == schedule(seed)
    assert schedule(seed) != schedule(seed + 1)


@pytest.mark.parametrize("seed", range(20))
def test_at_most_one_broker_down_and_a_pause_between(seed: int) -> None:
    down = [s for s in schedule(seed) if s.kind in BROKER_DOWN]
    assert down
    for i, a in enumerate(down):
        for b in down[i + 1:]:
            assert not overlap(a, b, REJOIN_PAUSE), (a, b)


@pytest.mark.parametrize("seed", range(20))
def test_a_cluster_crash_overlaps_no_other_fault(seed: int) -> None:
    steps = schedule(seed)
    for crash in (s for s in steps if s.kind == "crash"):
        assert not [s for s in steps if s is not crash and overlap(s, crash)]


@pytest.mark.parametrize("seed", range(20))
def test_at_most_max_active_lasting_faults_at_once(seed: int) -> None:
    steps = schedule(seed)
    for s in steps:
        assert s.end <= 120 + 1e-6
        active = [o for o in steps if o.duration and o.at <= s.at < o.end]
        assert len(active) <= MAX_ACTIVE


def test_every_kind_is_drawn_and_combined() -> None:
    steps = schedule(7, seconds=300)
    assert {s.kind for s in steps} == set(KINDS)
    moves = {s.args["to"] for s in steps if s.kind == "leader"}
    assert moves == {"other", "same", "previous"}
    overlapping = sum(1 for i, a in enumerate(steps) for b in steps[i + 1:]
                      if a.duration and b.duration and overlap(a, b))
    assert overlapping > 10


def test_chosen_kinds_only_and_none_is_empty() -> None:
    assert {s.kind for s in schedule(3, kinds=("leader", "errors"))} == {"leader", "errors"}
    assert schedule(3, kinds=()) == []
    with pytest.raises(ValueError, match="unknown nemesis kinds"):
        schedule(3, kinds=("meteor",))


def test_injected_errors_are_real_apis_and_recoverable_errors() -> None:
    left_out = {"OFFSET_OUT_OF_RANGE", "FENCED_INSTANCE_ID", "TOPIC_AUTHORIZATION_FAILED",
                "UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER", "PRODUCER_FENCED",
                "INVALID_PRODUCER_EPOCH"}
    for api, error, scope in ERROR_MENU:
        assert api_key_of(api) is not None
        assert code_named(error) > 0
        assert error not in left_out
        assert scope in ("topic", "group", "txn")
    shots = [shot for s in schedule(5, seconds=300) if s.kind == "errors"
             for shot in s.args["shots"]]
    assert len({(s["api"], s["error"]) for s in shots}) > 20


def test_transactional_errors_only_with_transactional_ids() -> None:
    steps = plan(random.Random(9), ("errors",), 300, Targets({"queue": 4}, ("g",)))
    scopes = {shot["scope"] for s in steps for shot in s.args["shots"]}
    assert scopes == {"topic", "group"}
