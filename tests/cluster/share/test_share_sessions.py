"""The share-session cache: epochs, the session limit, sessions of a connection."""

from __future__ import annotations

import pytest

from kaflite.cluster.share._sessions import (
    FINAL_EPOCH,
    SHARE_SESSION_LIMIT_REACHED,
    ShareSessionCache,
    next_epoch,
)
from kaflite.protocol import KafkaError, errors


def test_epochs_limit_and_connections() -> None:
    cache = ShareSessionCache(max_sessions=1)
    session, old = cache.open("g", "a", connection_id=7)
    assert old is None and session.epoch == 1
    with pytest.raises(KafkaError) as full:
        cache.open("g", "b")
    assert full.value.code == SHARE_SESSION_LIMIT_REACHED
    again, replaced = cache.open("g", "a", connection_id=8)      # epoch 0 again: replaces
    assert replaced is session and cache.get("g", "a") is again
    assert cache.of_connection(7) == [] and cache.of_connection(8) == [again]
    assert cache.check("g", "a", 1) is again
    cache.advance(again)
    with pytest.raises(errors.InvalidShareSessionEpochError):
        cache.check("g", "a", 1)
    assert cache.check("g", "a", FINAL_EPOCH) is again          # -1 closes whatever the epoch
    with pytest.raises(errors.ShareSessionNotFoundError):
        cache.check("g", "nobody", 1)
    assert cache.close("g", "a") is again and cache.of_group("g") == []
    assert next_epoch(2**31 - 1) == 1                            # wraps past Int32.MAX
