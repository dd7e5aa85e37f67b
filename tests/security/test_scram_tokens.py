"""SCRAM's ``tokenauth=true`` extension (KIP-48): the user name is a delegation token's
id, the credential the store's for that token, and the principal the token's owner."""

from __future__ import annotations

import pytest

from kaflite.security.errors import SaslAuthenticationFailed
from kaflite.security.scram import (
    ScramClient,
    ScramServer,
    StaticCredentialStore,
    TokenCredential,
    scram_credential,
)

MECH = "SCRAM-SHA-512"
TOKEN_ID, HMAC_B64, EXPIRY = "b3a2c5f0-token", "aGVsbG8gdG9rZW4=", 1_900_000_000_000


class TokenStore(StaticCredentialStore):
    """Users from the static store, and one token owned by alice."""

    def token(self, token_id: str, mechanism: str) -> TokenCredential | None:
        if token_id != TOKEN_ID:
            return None
        return TokenCredential(scram_credential(mechanism, HMAC_B64), "alice", EXPIRY)


def store() -> TokenStore:
    s = TokenStore()
    s.add_user(TOKEN_ID, "a user's own password", mechanisms=(MECH,))   # same name, no token
    return s


def exchange(server: ScramServer, client: ScramClient) -> None:
    final = client.respond(server.respond(client.start()))
    assert final is not None
    assert client.respond(server.respond(final)) is None


def test_a_token_login_is_its_owner() -> None:
    server = ScramServer(MECH, store())
    exchange(server, ScramClient(MECH, TOKEN_ID, HMAC_B64, extensions={"tokenauth": "true"}))
    assert server.complete and server.principal == "User:alice"
    assert server.token_authenticated and server.expires_at_ms == EXPIRY


def test_tokenauth_is_read_as_javas_parseboolean() -> None:
    server = ScramServer(MECH, store())
    exchange(server, ScramClient(MECH, TOKEN_ID, HMAC_B64, extensions={"tokenauth": "TRUE"}))
    assert server.principal == "User:alice"


def test_without_tokenauth_the_name_is_a_user() -> None:
    server = ScramServer(MECH, store())
    exchange(server, ScramClient(MECH, TOKEN_ID, "a user's own password",
                                 extensions={"tokenauth": "false"}))
    assert server.principal == f"User:{TOKEN_ID}" and not server.token_authenticated
    assert server.expires_at_ms is None
    # and the token's password is not that user's
    with pytest.raises(SaslAuthenticationFailed):
        exchange(ScramServer(MECH, store()), ScramClient(MECH, TOKEN_ID, HMAC_B64))


def test_a_user_password_is_not_a_token_and_unknown_tokens_fail() -> None:
    with pytest.raises(SaslAuthenticationFailed):
        exchange(ScramServer(MECH, store()), ScramClient(
            MECH, TOKEN_ID, "a user's own password", extensions={"tokenauth": "true"}))
    with pytest.raises(SaslAuthenticationFailed):
        exchange(ScramServer(MECH, store()), ScramClient(
            MECH, "no-such-token", HMAC_B64, extensions={"tokenauth": "true"}))
