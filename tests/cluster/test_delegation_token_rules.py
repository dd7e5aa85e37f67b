"""The rules of delegation tokens, as Kafka's DelegationTokenControlManager has them:
lifetimes, the order of renewal's and expiry's checks, the sweep, and the HMAC."""

from __future__ import annotations

import dataclasses
from typing import Any

from kaflite.cluster import delegation_tokens as dt

SETTINGS = dt.TokenSettings("secret", max_lifetime_ms=10_000, expiry_time_ms=3_000,
                            check_interval_ms=1_000)
NOW = 1_000_000


def token(**changes: Any) -> dt.TokenInfo:
    base = dt.create(SETTINGS, "User:alice", "User:admin", ["User:carol"], -1, NOW)
    return dataclasses.replace(base, **changes)


def test_hmac_is_hmac_sha512_of_the_id_keyed_by_the_secret() -> None:
    # RFC 4231, test case 2
    assert dt.hmac_of("Jefe", "what do ya want for nothing?").hex() == (
        "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
        "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737")


def test_create_caps_the_lifetimes() -> None:
    t = token()
    assert (t.issue_ms, t.expiry_ms, t.max_ms) == (NOW, NOW + 3_000, NOW + 10_000)
    short = dt.create(SETTINGS, "User:a", "User:a", [], 2_000, NOW)
    assert (short.expiry_ms, short.max_ms) == (NOW + 2_000, NOW + 2_000)
    longer = dt.create(SETTINGS, "User:a", "User:a", [], 99_000, NOW)
    assert longer.max_ms == NOW + 10_000
    assert dt.create(SETTINGS, "User:a", "User:a", [], -1, NOW).token_id != longer.token_id


def test_renew_checks_in_kafkas_order() -> None:
    t = token()
    assert dt.renew(SETTINGS, None, "User:alice", -1, NOW)[0] == dt.NOT_FOUND
    # expired before owner mismatch
    assert dt.renew(SETTINGS, t, "User:bob", -1, NOW + 3_001)[0] == dt.EXPIRED
    assert dt.renew(SETTINGS, t, "User:bob", -1, NOW)[0] == dt.OWNER_MISMATCH
    # the requester is not a renewer
    assert dt.renew(SETTINGS, t, "User:admin", -1, NOW)[0] == dt.OWNER_MISMATCH
    code, renewed = dt.renew(SETTINGS, t, "User:carol", 1_000, NOW + 500)
    assert code == 0 and renewed is not None and renewed.expiry_ms == NOW + 1_500
    _, capped = dt.renew(SETTINGS, token(expiry_ms=NOW + 9_500), "User:alice", -1, NOW + 9_000)
    assert capped is not None and capped.expiry_ms == t.max_ms


def test_expire_checks_in_kafkas_order() -> None:
    t = token()
    assert dt.expire(None, "User:alice", -1, NOW)[0] == dt.NOT_FOUND
    # owner mismatch before expired
    assert dt.expire(t, "User:bob", 0, NOW + 5_000)[0] == dt.OWNER_MISMATCH
    assert dt.expire(t, "User:alice", -1, NOW + 5_000) == (0, None, NOW + 5_000)
    assert dt.expire(t, "User:alice", 0, NOW + 5_000)[0] == dt.EXPIRED
    code, changed, expiry = dt.expire(t, "User:carol", 100, NOW)
    assert code == 0 and changed is not None and changed.expiry_ms == expiry == NOW + 100


def test_sweep_and_records() -> None:
    live, old = token(), token(token_id="old", expiry_ms=NOW - 1)
    assert dt.sweep([live, old], NOW) == ["old"]
    assert dt.from_record(dt.record(live)) == live
    assert dt.removal("old").token_id == "old"


def test_settings_from_props() -> None:
    assert not dt.TokenSettings.from_props({}).enabled
    assert not dt.TokenSettings.from_props({dt.SECRET_KEY: ""}).enabled
    s = dt.TokenSettings.from_props({dt.SECRET_KEY: "k", dt.MAX_LIFETIME: "5"})
    assert s.enabled and s.max_lifetime_ms == 5 and s.expiry_time_ms == 24 * 3600 * 1000
