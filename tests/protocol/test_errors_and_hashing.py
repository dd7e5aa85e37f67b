"""Kafka error classes and Java-identical hashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.protocol import errors
from kaflite.protocol.hashing import (
    coordinator_partition,
    java_string_hash,
    murmur2,
    murmur2_partition,
    to_positive,
)


def test_recovery_table_errors_exist_with_kafka_codes_and_flags() -> None:
    expected = {
        "NotLeaderOrFollowerError": (6, True),
        "LeaderNotAvailableError": (5, True),
        "NotCoordinatorError": (16, True),
        "CoordinatorLoadInProgressError": (14, True),
        "IllegalGenerationError": (22, False),
        "StaleMemberEpochError": (113, False),
        "UnknownMemberIdError": (25, False),
        "FencedInstanceIdError": (82, False),
        "OffsetOutOfRangeError": (1, False),
        "TopicAuthorizationFailedError": (29, False),
    }
    for name, (code, retriable) in expected.items():
        cls = getattr(errors, name)
        assert cls.code == code and cls.retriable is retriable, name
        assert errors.error_class(code) is cls


def test_raise_for_code() -> None:
    errors.raise_for_code(0)
    with pytest.raises(errors.NotLeaderOrFollowerError) as info:
        errors.raise_for_code(6, "t-0")
    assert "NOT_LEADER_OR_FOLLOWER" in str(info.value) and "t-0" in str(info.value)
    with pytest.raises(errors.UnknownErrorCode) as unknown:
        errors.raise_for_code(31000)
    assert unknown.value.code == 31000


# Vectors from Kafka's own unit tests for Utils.murmur2.
MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), MURMUR2_VECTORS)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64), st.integers(1, 500))
def test_murmur2_partition_agrees_with_kafka_python(key: bytes, partitions: int) -> None:
    from kafka.partitioner.default import murmur2 as reference

    assert murmur2_partition(key, partitions) == (reference(key) & 0x7FFFFFFF) % partitions


def test_to_positive_clears_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0


def test_java_string_hash() -> None:
    # Values of String.hashCode() computed by the JVM.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units


def test_coordinator_partition_maps_min_value_to_zero() -> None:
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("hello", 50) == 99162322 % 50
