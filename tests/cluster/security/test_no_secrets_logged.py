"""Nothing logged, and nothing in an event or a repr, holds a password, a proof or a token."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kaflite.client import AuthenticationError, Producer
from kaflite.cluster import Cluster
from kaflite.security.certs import Pki

WRONG = "wrong-pass-7f3a"
TOKEN_SUB = "tok-owner"


def _conf(cluster: Cluster, pki: Pki, mechanism: str, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": cluster.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "ssl.ca.location": str(pki.ca), **extra}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_no_password_in_logs_events_or_reprs(secure_cluster: Cluster, pki: Pki, mechanism: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []

    async def go() -> None:
        good = Producer(_conf(secure_cluster, pki, mechanism, **{
            "sasl.username": "alice", "sasl.password": "alice-secret"}))
        texts.append(repr(good))
        async with good:
            await good.send("no-secrets", b"v")
            texts.extend(str(e) for e in good.events())
            texts.extend(repr(c) for c in good.connections())
        bad = Producer(_conf(secure_cluster, pki, mechanism, **{
            "sasl.username": "alice", "sasl.password": WRONG}))
        with pytest.raises(AuthenticationError) as failed:
            async with bad:
                await bad.send("no-secrets", b"v")
        texts.append(str(failed.value))
        texts.extend(str(e) for e in bad.events())

    asyncio.run(asyncio.wait_for(go(), 60))
    texts.extend(r.getMessage() for r in caplog.records)
    texts.extend(repr(c) for c in secure_cluster.connections(include_closed=True))
    assert caplog.records, "nothing was logged at DEBUG: the check would be empty"
    for secret in ("alice-secret", WRONG):
        leaked = [t for t in texts if secret in t]
        assert not leaked, leaked
