"""OAUTHBEARER with signed JWTs on the broker: a listener validating tokens against a
JWKS file, with issuer and audience checks; kaflite's client and confluent-kafka log in
with a signed token, and a token from another key, issuer or audience is refused."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from kaflite.client import AuthenticationError, Producer
from kaflite.cluster import Cluster
from kaflite.security import jwt

KEY = ec.generate_private_key(ec.SECP256R1())
OTHER = ec.generate_private_key(ec.SECP256R1())
ISSUER, AUDIENCE = "https://idp.test", "kafka"


def token(key: ec.EllipticCurvePrivateKey = KEY, **override: object) -> str:
    now = int(time.time())
    claims = {"sub": "svc-orders", "iat": now, "exp": now + 300, "iss": ISSUER,
              "aud": AUDIENCE, **override}
    return jwt.sign_token(claims, key, kid="k1")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    jwks = Path(tmp_path_factory.mktemp("jwks")) / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwt.public_jwk(KEY.public_key(), "k1")]}))
    config = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    with Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0,OAUTH://127.0.0.1:0",
                 config=config) as c:
        yield c


def _conf(cluster: Cluster, jws: str) -> dict[str, object]:
    return {"bootstrap.servers": cluster.bootstrap("OAUTH"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (jws, time.time() + 300)}


def test_kaflite_client_with_a_signed_token(cluster: Cluster) -> None:
    async def go() -> None:
        async with Producer(_conf(cluster, token()), client_id="jwks-kaflite") as p:
            await p.send("jwks", b"signed")

    asyncio.run(asyncio.wait_for(go(), 30))
    rows = cluster.connections(client_id="jwks-kaflite", include_closed=True)
    assert rows and {(r.sasl_mechanism, r.principal) for r in rows} == {
        ("OAUTHBEARER", "User:svc-orders")}


# The tokens are made when the test runs, not when it is collected: a collected
# token could expire before its test's turn comes (under pytest-xdist, say).
@pytest.mark.parametrize(("make", "reason"), [
    (lambda: token(OTHER), "signature"), (lambda: token(iss="https://evil"), "issuer"),
    (lambda: token(aud="other"), "audience"),
    (lambda: jwt.unsecured_token("svc-orders"), "none")])
def test_a_bad_token_is_refused_with_a_reason(cluster: Cluster, make: Callable[[], str],
                                               reason: str) -> None:
    jws = make()

    async def go() -> None:
        async with Producer(_conf(cluster, jws)) as p:
            await p.send("jwks", b"never")

    with pytest.raises(AuthenticationError, match=reason):
        asyncio.run(asyncio.wait_for(go(), 30))


def test_confluent_kafka_with_a_signed_token(cluster: Cluster) -> None:
    import confluent_kafka

    signed = token()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap("OAUTH"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "client.id": "jwks-rdkafka",
        "oauth_cb": lambda _config: (signed, time.time() + 300, "svc-orders")})
    producer.produce("jwks", b"from librdkafka")
    assert producer.flush(30) == 0
    rows = cluster.connections(client_id="jwks-rdkafka", include_closed=True)
    assert rows and {r.principal for r in rows} == {"User:svc-orders"}
