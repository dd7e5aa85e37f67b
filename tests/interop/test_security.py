"""kaflite's client against each target secured the same way: a SASL_PLAINTEXT listener
with SCRAM-SHA-256 users made through the admin client, Kafka's StandardAuthorizer
(kaflite's authorizer takes the same settings), client quotas and delegation tokens.

The PLAINTEXT listener's principal (``User:ANONYMOUS``) is the super user, as the
brokers and the test's admin client use it; ``alice`` comes in over SCRAM and may do
only what the ACLs given to her allow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kaflite.client import Admin, AuthenticationError, Consumer, Producer
from kaflite.client._quotas import ClientQuotaAlteration, QuotaFilterComponent
from kaflite.client._token_admin import DelegationToken
from kaflite.protocol import errors
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, run, uid, upsert_scram_user
from tests.interop.conftest import make_target, started

pytestmark = pytest.mark.interop

SASL = "SASL_PLAINTEXT"
MECHANISM = "SCRAM-SHA-256"
SECURED = {
    "sasl.enabled.mechanisms": MECHANISM,
    # Kafka wants a login module for each mechanism a listener enables
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    # delegation tokens on (KIP-48); Kafka wants it on its controllers too (combined nodes)
    "delegation.token.secret.key": "interop-token-secret",
}
ALICE = "User:alice"


@pytest.fixture(scope="module", params=["kaflite-1", "kafka-1"])
def secured(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    target = make_target(request.param, request, config=SECURED, listeners=[SASL])
    yield from started(target)


@pytest.fixture(scope="module")
def alice(secured: ClusterUnderTest) -> dict[str, object]:
    """alice's SCRAM credentials, made once per target; her client settings."""
    assert run(upsert_scram_user(secured.bootstrap_servers, "alice", "alice-secret",
                                 MECHANISM)) == {"alice": [(MECHANISM, 4096)]}
    return {"bootstrap_servers": secured.bootstrap(SASL), "security_protocol": SASL,
            "sasl_mechanism": MECHANISM, "sasl_username": "alice",
            "sasl_password": "alice-secret", "client_id": "alice"}


def allow(resource: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(resource, name, PatternType.LITERAL, ALICE, "*", operation,
                      AclPermissionType.ALLOW)


async def wait_until(what: str, check: object) -> None:
    """Until the coroutine function ``check`` returns True (an ACL change reaches the
    brokers' authorizers a little after CreateAcls/DeleteAcls is answered on Kafka)."""
    deadline = time.monotonic() + 20
    while not await check():    # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def test_a_wrong_password_is_refused(secured: ClusterUnderTest,
                                     alice: dict[str, object]) -> None:
    async def main() -> None:
        async with Admin(**{**alice, "sasl_password": "wrong"}) as admin:
            await admin.list_topics()

    with pytest.raises(AuthenticationError):
        run(main())


def test_acls_deny_then_allow_then_deny_again(secured: ClusterUnderTest,
                                              alice: dict[str, object]) -> None:
    topic, group = uid("secured"), uid("secured-group")
    plain = secured.bootstrap_servers

    async def can_write() -> bool:
        async with Producer(**alice, enable_idempotence=False, max_block_ms=5000) as p:
            try:
                await p.send(topic, b"by alice", partition=0)
                return True
            except errors.TopicAuthorizationFailedError:
                return False

    async def main() -> tuple[list[str], list[AclBinding], list[bytes]]:
        await create_topic(plain, topic, 1, 1)
        async with Admin(**alice) as as_alice:
            hidden = await as_alice.list_topics()   # no DESCRIBE: the topic is not listed
        assert not await can_write()
        async with Admin(bootstrap_servers=plain) as admin:
            granted = [allow(ResourceType.TOPIC, topic, AclOperation.WRITE),
                       allow(ResourceType.TOPIC, topic, AclOperation.READ),
                       allow(ResourceType.GROUP, group, AclOperation.READ)]
            await admin.create_acls(granted)
            await wait_until("WRITE granted", can_write)
            listed = await admin.describe_acls(AclBindingFilter(principal=ALICE))
            async with Consumer(**alice, group_id=group, auto_offset_reset="earliest") as c:
                c.subscribe([topic])
                got: list[bytes] = []
                deadline = time.monotonic() + 30
                while not got:
                    got += [r.value or b"" for r in await c.poll(200)]
                    assert time.monotonic() < deadline, "alice read nothing"
            deleted = await admin.delete_acls([AclBindingFilter(principal=ALICE)])
            assert sorted(map(str, deleted)) == sorted(map(str, granted))

            async def denied() -> bool:
                return not await can_write()

            await wait_until("WRITE revoked", denied)
        return hidden, listed, got

    hidden, listed, got = run(main(), timeout=150)
    assert topic not in hidden
    assert {(b.resource_type, b.name, b.operation) for b in listed} == {
        (ResourceType.TOPIC, topic, AclOperation.WRITE),
        (ResourceType.TOPIC, topic, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.READ)}
    assert got and set(got) == {b"by alice"}


def test_a_produce_quota_throttles_alice(secured: ClusterUnderTest,
                                         alice: dict[str, object]) -> None:
    topic = uid("quota")
    plain = secured.bootstrap_servers
    entity = {"user": "alice"}

    async def main() -> tuple[dict[str, float], int]:
        await create_topic(plain, topic, 1, 1)
        async with Admin(bootstrap_servers=plain) as admin:
            await admin.create_acls([allow(ResourceType.TOPIC, topic, AclOperation.WRITE)])
            await admin.alter_client_quotas([ClientQuotaAlteration(
                entity, {"producer_byte_rate": 1024.0})])
            alices = [QuotaFilterComponent.of_entity("user", "alice")]

            async def described() -> bool:   # Kafka's brokers apply it after the controller
                return bool(await admin.describe_client_quotas(alices, strict=True))

            await wait_until("the quota described", described)
            quotas = await admin.describe_client_quotas(alices, strict=True)
            try:
                async with Producer(**alice, enable_idempotence=False, linger_ms=5) as p:
                    await wait_until("WRITE granted", lambda: writable(p, topic))
                    # 16 KiB in one request: Kafka measures the rate over its whole quota
                    # window (11 s), so this is well over 1 KiB/s however it is counted
                    await p.send_batch(topic, [b"x" * 1024] * 16, partition=0)
                    throttled = sum(c.throttled_ms for c in p.connections())
            finally:
                await admin.alter_client_quotas([ClientQuotaAlteration(
                    entity, {"producer_byte_rate": None})])
                await admin.delete_acls([AclBindingFilter(principal=ALICE)])
        [(_, values)] = quotas.items()
        return values, throttled

    values, throttled = run(main(), timeout=120)
    assert values == {"producer_byte_rate": 1024.0}
    assert throttled > 0, "the broker never throttled alice's produce"


async def writable(p: Producer, topic: str) -> bool:
    try:
        await p.send(topic, b"probe", partition=0)
        return True
    except errors.TopicAuthorizationFailedError:
        return False


def test_a_delegation_token_logs_in_as_its_owner(secured: ClusterUnderTest,
                                                 alice: dict[str, object]) -> None:
    """alice's token (over SCRAM, tokenauth=true) is alice: her ACL lets it write; a token
    login may not ask for tokens, nor may PLAINTEXT; expired, it logs in no more."""
    topic = uid("token")
    plain = secured.bootstrap_servers

    def with_token(token: DelegationToken) -> dict[str, object]:
        return {**alice, "sasl_username": token.token_id, "sasl_password": token.hmac_b64,
                "sasl_scram_tokenauth": True, "client_id": "alice-token"}

    async def main() -> tuple[DelegationToken, list[DelegationToken], int]:
        await create_topic(plain, topic, 1, 1)
        async with Admin(bootstrap_servers=plain) as admin:
            with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
                await admin.create_delegation_token()
            await admin.create_acls([allow(ResourceType.TOPIC, topic, AclOperation.WRITE)])
        async with Admin(**alice) as as_alice:
            token = await as_alice.create_delegation_token()

        async def can_write() -> bool:    # the token and the ACL reach the brokers
            try:
                async with Producer(**with_token(token), enable_idempotence=False,
                                    max_block_ms=5000) as p:
                    await p.send(topic, b"by alice's token", partition=0)
                return True
            except (AuthenticationError, errors.TopicAuthorizationFailedError):
                return False

        await wait_until("the token writes", can_write)
        # described once it reached the broker: Kafka's brokers learn a new token from
        # the metadata log after CreateDelegationToken returns (a describe at once, on
        # Kafka, came back empty)
        async with Admin(**alice) as as_alice:
            described = await as_alice.describe_delegation_token()
        async with Admin(**with_token(token)) as by_token:
            with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
                await by_token.create_delegation_token()
        async with Admin(**alice) as as_alice:
            expiry = await as_alice.expire_delegation_token(token.hmac)

        async def refused() -> bool:
            try:
                async with Admin(**with_token(token)) as by_token:
                    await by_token.list_topics()
                return False
            except AuthenticationError:
                return True

        await wait_until("the expired token is refused", refused)
        return token, described, expiry

    token, described, expiry = run(main(), timeout=150)
    assert (token.owner, token.requester) == (ALICE, ALICE)
    assert token.token_id in {t.token_id for t in described}
    assert token.issue_timestamp_ms <= expiry
