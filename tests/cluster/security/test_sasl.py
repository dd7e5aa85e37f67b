"""SASL on the broker: the handshake, each mechanism, and every bad input closing
only its own connection while another client keeps producing."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from kaflite.client import Producer
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import SaslAuthenticateRequest
from kaflite.security.sasl import client_mechanism
from kaflite.security.scram import scram_credential
from tests.cluster.security._wire import Wire

FAILED = errors.SaslAuthenticationFailedError.code
UNSUPPORTED = errors.UnsupportedSaslMechanismError.code
ILLEGAL = errors.IllegalSaslStateError.code


def port(cluster: Cluster, listener: str) -> int:
    return cluster.broker(0).bound[listener]


@asynccontextmanager
async def bystander(cluster: Cluster) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """A producer on the PLAINTEXT listener producing all along; yields a check
    that it is still producing (the records it got acknowledged so far)."""
    # (Named by a uuid: ``id(object())`` of a temporary object repeats, as CPython reuses
    # the freed address, and a second bystander on the module's cluster once got
    # TOPIC_ALREADY_EXISTS.)
    cluster.create_topic(topic := f"bystander-{uuid.uuid4().hex[:12]}")
    acked: list[int] = []
    failures: list[BaseException] = []
    stop = asyncio.Event()
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as p:
        async def produce() -> None:
            for i in range(10_000):
                if stop.is_set():
                    return
                try:
                    acked.append((await p.send(topic, f"r{i}".encode())).offset)
                except Exception as exc:   # any failure is the test's failure
                    failures.append(exc)
                    return
                await asyncio.sleep(0.005)

        task = asyncio.create_task(produce())

        async def check() -> int:
            before = len(acked)
            for _ in range(400):          # bounded: at most a few seconds
                if failures or len(acked) > before:
                    break
                await asyncio.sleep(0.01)
            assert not failures, failures
            assert len(acked) > before, "the bystander stopped producing"
            return len(acked)

        try:
            await check()
            yield check
        finally:
            stop.set()
            await task
    assert acked == list(range(len(acked)))


def run(coro: Awaitable[None]) -> None:
    async def main() -> None:
        await coro
    asyncio.run(main())


def test_plain_and_scram_authenticate_and_registry_shows_them(secure_cluster: Cluster) -> None:
    cluster = secure_cluster
    cluster.controller.alter_scram(
        [("dave", scram_credential("SCRAM-SHA-512", "dave-secret"))], [])

    async def main() -> None:
        sasl = port(cluster, "SASL_PLAINTEXT")
        for mechanism, user, password in [("PLAIN", "alice", "alice-secret"),     # sasl.users
                                          ("PLAIN", "bob", 'bob "quoted" secret'),  # JAAS
                                          ("SCRAM-SHA-256", "carol", "carol-secret"),
                                          ("SCRAM-SHA-512", "dave", "dave-secret")]:
            w = await Wire.open(sasl)
            await w.api_versions()
            done = await w.authenticate(mechanism, user, password)
            assert done.error_code == 0, done
            assert done.session_lifetime_ms == 0       # no connections.max.reauth.ms here
            md = await w.metadata()
            assert [b.port for b in md.brokers] == [sasl]   # this listener's endpoints
            rows = [c for c in cluster.connections() if c.principal == f"User:{user}"]
            assert [(r.sasl_mechanism, r.security_protocol, r.listener) for r in rows] == [
                (mechanism, "SASL_PLAINTEXT", "SASL_PLAINTEXT")]
            assert rows[0].authenticated_at is not None
            w.close()

    run(main())


def test_bad_inputs_close_only_their_connection(secure_cluster: Cluster) -> None:
    cluster = secure_cluster
    sasl = port(cluster, "SASL_PLAINTEXT")

    async def main() -> None:
        async with bystander(cluster) as still_producing:
            # a wrong password: SASL_AUTHENTICATION_FAILED with a message, then closed
            w = await Wire.open(sasl)
            failed = await w.authenticate("PLAIN", "alice", "wrong")
            assert failed.error_code == FAILED and failed.error_message
            assert "wrong" not in failed.error_message
            assert await w.closed_by_broker()
            await still_producing()

            # an unknown mechanism, and one not enabled on this listener
            for mechanism in ("GSSAPI", "OAUTHBEARER", "NOPE"):
                w = await Wire.open(sasl)
                shake = await w.handshake(mechanism)
                assert shake.error_code == UNSUPPORTED
                assert shake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
                assert await w.closed_by_broker()
            await still_producing()

            # any request but ApiVersions/SaslHandshake/SaslAuthenticate before auth
            w = await Wire.open(sasl)
            await w.api_versions()
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await w.metadata()
            await still_producing()

            # SaslAuthenticate with no SaslHandshake first
            w = await Wire.open(sasl)
            res = await w.request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), 2)
            assert res.error_code == ILLEGAL
            assert await w.closed_by_broker()

            # a malformed SCRAM client-first message
            w = await Wire.open(sasl)
            assert (await w.handshake("SCRAM-SHA-256")).error_code == 0
            res = await w.request(SaslAuthenticateRequest(auth_bytes=b"\xff garbage,,="), 2)
            assert res.error_code in (FAILED, ILLEGAL) and res.error_message
            assert await w.closed_by_broker()
            await still_producing()

            # a wrong nonce in the client-final message
            w = await Wire.open(sasl)
            client = client_mechanism("SCRAM-SHA-256", {"sasl.username": "carol",
                                                        "sasl.password": "carol-secret"})
            assert (await w.handshake("SCRAM-SHA-256")).error_code == 0
            first = await w.request(SaslAuthenticateRequest(auth_bytes=client.start()), 2)
            final = client.respond(bytes(first.auth_bytes))
            assert final is not None
            parts = final.decode().split(",")
            parts = [("r=" + p[2:-4] + "AAAA") if p.startswith("r=") else p for p in parts]
            res = await w.request(SaslAuthenticateRequest(auth_bytes=",".join(parts).encode()), 2)
            assert res.error_code in (FAILED, ILLEGAL)
            assert await w.closed_by_broker()

            # a replayed client-final (valid for an earlier exchange) fails
            w = await Wire.open(sasl)
            assert (await w.handshake("SCRAM-SHA-256")).error_code == 0
            client2 = client_mechanism("SCRAM-SHA-256", {"sasl.username": "carol",
                                                         "sasl.password": "carol-secret"})
            await w.request(SaslAuthenticateRequest(auth_bytes=client2.start()), 2)
            res = await w.request(SaslAuthenticateRequest(auth_bytes=final), 2)
            assert res.error_code in (FAILED, ILLEGAL)
            assert await w.closed_by_broker()
            await still_producing()

    run(main())


def test_handshake_v0_takes_bare_tokens(secure_cluster: Cluster) -> None:
    async def main() -> None:
        w = await Wire.open(port(secure_cluster, "SASL_PLAINTEXT"))
        shake = await w.handshake("PLAIN", version=0)
        assert shake.error_code == 0
        await w.send_raw(len(token := b"\0alice\0alice-secret").to_bytes(4, "big") + token)
        assert await w.read_frame() == b""
        assert [b.port for b in (await w.metadata()).brokers] == [
            port(secure_cluster, "SASL_PLAINTEXT")]
        w.close()

    run(main())


def test_reauthentication(secure_cluster: Cluster) -> None:
    """connections.max.reauth.ms=1500 on REAUTH: the session lifetime is announced; a
    client that re-authenticates keeps going, one that does not is disconnected, and a
    re-authentication may not change the principal."""
    reauth = port(secure_cluster, "REAUTH")

    async def main() -> None:
        keeps, lapses, switches = [await Wire.open(reauth) for _ in range(3)]
        for w in (keeps, lapses, switches):
            assert (await w.authenticate("PLAIN", "alice", "alice-secret")).error_code == 0
            assert 0 < w.session_lifetime_ms <= 1500
        for _ in range(3):               # three re-authentications, each before expiry
            await asyncio.sleep(0.5)
            assert (await keeps.authenticate("PLAIN", "alice", "alice-secret")).error_code == 0
            await keeps.metadata()
        rows = [c for c in secure_cluster.connections() if c.listener == "REAUTH"
                and c.reauthentications == 3]
        assert len(rows) == 1
        # the one that did not re-authenticate is closed at its next request
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await lapses.metadata()
        # a re-authentication as someone else fails, and closes the connection
        res = await switches.authenticate("PLAIN", "carol", "carol-secret")
        assert res.error_code == FAILED and "principal" in (res.error_message or "")
        assert await switches.closed_by_broker()
        keeps.close()

    run(main())


def test_scram_credentials_admin_apis_and_restart(tmp_path: object) -> None:
    from pathlib import Path

    from kaflite.protocol.messages import (
        AlterUserScramCredentialsRequest,
        DescribeUserScramCredentialsRequest,
    )
    from kaflite.protocol.messages import alter_user_scram_credentials_request as aq
    from kaflite.protocol.messages import describe_user_scram_credentials_request as dq
    from kaflite.security.scram import salted_password

    data_dir = Path(str(tmp_path))
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    salt = b"0123456789abcdef"

    async def alter_and_describe(cluster: Cluster) -> None:
        w = await Wire.open(cluster.broker(0).bound["PLAINTEXT"])
        res = await w.request(AlterUserScramCredentialsRequest(
            deletions=[aq.ScramCredentialDeletion("ghost", 1)],
            upsertions=[
                aq.ScramCredentialUpsertion("erin", 2, 8192, salt,
                                            salted_password("SCRAM-SHA-512", "erin-pw", salt,
                                                            8192)),
                aq.ScramCredentialUpsertion("weak", 1, 100, salt, b"x" * 32),
                aq.ScramCredentialUpsertion("twice", 1, 4096, salt, b"x" * 32),
                aq.ScramCredentialUpsertion("twice", 1, 4096, salt, b"y" * 32),
                aq.ScramCredentialUpsertion("odd", 9, 4096, salt, b"x" * 32),
                # Kafka's ScramControlManager: once a request per user, whatever the
                # mechanism (the Java admin's two mechanisms of one user failed so on
                # Kafka 4.4 and were both applied by kaflite)
                aq.ScramCredentialUpsertion("both", 1, 4096, salt, b"x" * 32),
                aq.ScramCredentialUpsertion("both", 2, 4096, salt, b"x" * 64),
            ]), 0)
        assert {r.user: r.error_code for r in res.results} == {
            "ghost": errors.ResourceNotFoundError.code, "erin": 0,
            "weak": errors.UnacceptableCredentialError.code,
            "twice": errors.DuplicateResourceError.code,
            "odd": errors.UnsupportedSaslMechanismError.code,
            "both": errors.DuplicateResourceError.code}
        # a deletion and an upsertion of one user: the same
        res = await w.request(AlterUserScramCredentialsRequest(
            deletions=[aq.ScramCredentialDeletion("erin", 2)],
            upsertions=[aq.ScramCredentialUpsertion("erin", 1, 4096, salt, b"x" * 32)]), 0)
        assert [(r.user, r.error_code) for r in res.results] == [
            ("erin", errors.DuplicateResourceError.code)]
        described = await w.request(DescribeUserScramCredentialsRequest(
            users=[dq.UserName("erin"), dq.UserName("weak"), dq.UserName("both")]), 0)
        by_user = {r.user: r for r in described.results}
        assert [(c.mechanism, c.iterations) for c in by_user["erin"].credential_infos] == [
            (2, 8192)]
        assert by_user["weak"].error_code == errors.ResourceNotFoundError.code
        assert by_user["both"].error_code == errors.ResourceNotFoundError.code
        w.close()

    async def login(cluster: Cluster) -> int:
        w = await Wire.open(cluster.broker(0).bound["SASL_PLAINTEXT"])
        res = await w.authenticate("SCRAM-SHA-512", "erin", "erin-pw")
        w.close()
        return res.error_code

    with Cluster(brokers=1, data_dir=data_dir, listeners=listeners) as cluster:
        cluster.call(alter_and_describe(cluster))
        assert cluster.call(login(cluster)) == 0
    # the metadata log (segments and snapshots) holds the credential, not the password
    stored = b"".join(f.read_bytes() for f in (data_dir / "__cluster_metadata-0").iterdir()
                      if f.suffix in (".log", ".checkpoint"))
    assert b"erin" in stored
    assert b"erin-pw" not in stored and base64.b64encode(b"erin-pw") not in stored
    with Cluster(brokers=1, data_dir=data_dir, listeners=listeners) as cluster:
        assert cluster.call(login(cluster)) == 0       # the credential survived a restart


def unsecured_token(claims: dict[str, object]) -> bytes:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()
    token = f"{part({'alg': 'none'})}.{part(claims)}."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_token_expiry_caps_the_session_and_expired_tokens_fail(
        secure_cluster: Cluster) -> None:
    sasl = port(secure_cluster, "SASL_PLAINTEXT")
    reauth = port(secure_cluster, "REAUTH")   # REAUTH allows every mechanism: 1.5 s sessions

    async def main() -> None:
        async with bystander(secure_cluster) as still_producing:
            now = time.time()
            # a token valid for 1 s more caps the session below connections.max.reauth.ms
            w = await Wire.open(reauth)
            assert (await w.handshake("OAUTHBEARER")).error_code == 0
            res = await w.request(SaslAuthenticateRequest(auth_bytes=unsecured_token(
                {"sub": "tokenuser", "iat": now, "exp": now + 1.0})), 2)
            assert res.error_code == 0, res
            assert 0 < res.session_lifetime_ms <= 1000
            rows = [c for c in secure_cluster.connections() if c.principal == "User:tokenuser"]
            assert [r.sasl_mechanism for r in rows] == ["OAUTHBEARER"]
            w.close()
            # an expired token
            w = await Wire.open(reauth)
            assert (await w.handshake("OAUTHBEARER")).error_code == 0
            res = await w.request(SaslAuthenticateRequest(auth_bytes=unsecured_token(
                {"sub": "tokenuser", "iat": now - 120, "exp": now - 60})), 2)
            # RFC 7628: an error challenge, which the client acknowledges with %x01
            assert res.error_code == 0 and b"invalid_token" in bytes(res.auth_bytes)
            res = await w.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
            # the error starts with the challenge, all of Kafka's error (franz-go's
            # TestOAuthAuth looks for the status there), and says why
            assert res.error_code == FAILED and res.error_message is not None
            assert res.error_message.startswith('{"status":"invalid_token"}: ')
            assert "expired" in res.error_message
            assert await w.closed_by_broker()
            await still_producing()
            # OAUTHBEARER is not enabled on SASL_PLAINTEXT
            w = await Wire.open(sasl)
            assert (await w.handshake("OAUTHBEARER")).error_code == UNSUPPORTED
            assert await w.closed_by_broker()

    run(main())
