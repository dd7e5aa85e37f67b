"""OAUTHBEARER: unsecured development tokens, oauth_cb, OIDC client credentials against a
local token endpoint, and signed JWTs against a JWKS file or URL."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.security import jwt
from kaflite.security.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslError,
    UnsupportedSaslMechanism,
)
from kaflite.security.oauthbearer import OAuthBearerClient, OAuthBearerServer, oauthbearer_server
from kaflite.security.sasl import SaslClient, SaslServer, client_mechanism, server_mechanism
from kaflite.security.scram import StaticCredentialStore

STORE = StaticCredentialStore()
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = ec.generate_private_key(ec.SECP256R1())
ISSUER, AUDIENCE = "https://idp.example", "kafka"


def run(client: SaslClient, server: SaslServer) -> bytes | None:
    """One OAUTHBEARER exchange; the server's failure reply when it refused the token."""
    reply = server.respond(client.start())
    answer = client.respond(reply)
    if answer is None:
        return None
    assert answer == b"\x01"
    return reply


def refused(server: SaslServer) -> str:
    """The client's %x01 after the error challenge: the exchange fails with an error that
    starts with the challenge (all of Kafka's OAuthBearerSaslServer's error), then says why."""
    with pytest.raises(SaslAuthenticationFailed) as info:
        server.respond(b"\x01")
    assert isinstance(server, OAuthBearerServer) and server.reason is not None
    challenge, _, why = str(info.value).partition(": ")
    assert json.loads(challenge)["status"] in ("invalid_token", "insufficient_scope")
    assert why == server.reason and "Bearer" not in str(info.value)
    return why


def claims(sub: str = "alice", life: int = 300, **extra: object) -> dict[str, object]:
    now = int(time.time())
    return {"sub": sub, "iat": now, "exp": now + life, "iss": ISSUER, "aud": [AUDIENCE],
            **extra}


def token_cb(token: str) -> dict[str, object]:
    return {"oauth_cb": lambda config: (token, time.time() + 300)}


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [
        jwt.public_jwk(RSA_KEY.public_key(), "rsa1", "RS256"),
        jwt.public_jwk(EC_KEY.public_key(), "ec1")]}))
    return path.as_uri()


def jwks_props(url: str) -> dict[str, str]:
    return {"sasl.oauthbearer.jwks.endpoint.url": url,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "sasl.oauthbearer.expected.audience": f"other,{AUDIENCE}"}


def test_unsecured_round_trip() -> None:
    client = client_mechanism("OAUTHBEARER", {
        "sasl.oauthbearer.config": "principal=alice scope=read,write extension_traceId=42"})
    server = server_mechanism("OAUTHBEARER", STORE, {})
    first = client.start()
    assert first.startswith(b"n,,\x01auth=Bearer ") and first.endswith(b"\x01traceId=42\x01\x01")
    assert client.respond(server.respond(first)) is None
    assert client.complete and server.complete and server.principal == "User:alice"
    assert isinstance(server, OAuthBearerServer) and server.extensions == {"traceId": "42"}
    assert server.expires_at_ms is not None
    assert abs(server.expires_at_ms - (time.time() + 3600) * 1000) < 5000
    assert isinstance(client, OAuthBearerClient) and client.expires_at_ms is not None


def test_oauth_cb_with_extensions() -> None:
    seen = []

    def cb(config: str) -> tuple[str, float, str, dict[str, str]]:
        seen.append(config)
        return jwt.unsecured_token("bob"), time.time() + 60, "bob", {"tenant": "t1"}

    client = client_mechanism("OAUTHBEARER", {"oauth_cb": cb, "sasl.oauthbearer.config": "x=y"})
    server = oauthbearer_server({})
    assert run(client, server) is None
    assert seen == ["x=y"] and server.principal == "User:bob" and server.extensions == {
        "tenant": "t1"}


def test_expired_unsecured_token_fails_the_rfc7628_way() -> None:
    later = oauthbearer_server({}, clock=lambda: time.time() + 7200)
    client = client_mechanism("OAUTHBEARER", {"sasl.oauthbearer.config": "principal=alice"})
    reply = run(client, later)
    assert reply is not None and json.loads(reply) == {"status": "invalid_token"}
    assert isinstance(client, OAuthBearerClient) and client.error == reply.decode()
    assert "expired" in refused(later)
    assert not later.complete and later.principal is None


@pytest.mark.parametrize(("token_claims", "props", "reason"), [
    ({"sub": "a", "exp": 10**10, "iat": 10**10}, {}, "in the future"),
    ({"sub": "a", "iat": 1}, {}, "no 'exp' claim"),
    ({"exp": 10**10}, {}, "no 'sub' claim"),
    ({"sub": "a", "exp": 10**10, "scope": ["read"]},
     {"unsecuredValidatorRequiredScope": "write"}, "required scope write"),
    ({"user": "a", "exp": 10**10}, {"unsecuredValidatorPrincipalClaimName": "login"},
     "no 'login' claim"),
])
def test_unsecured_validator_refuses(token_claims: dict[str, object], props: dict[str, str],
                                     reason: str) -> None:
    token = jwt.b64url(b'{"alg":"none"}') + "." + jwt.b64url(json.dumps(token_claims).encode()) \
        + "."
    server = oauthbearer_server(props)
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is not None
    assert re.search(reason, refused(server))


def test_unsecured_validator_claim_names() -> None:
    token = jwt.unsecured_token("carol", principal_claim="login", scope=("write",))
    server = oauthbearer_server({"unsecuredValidatorPrincipalClaimName": "login",
                                 "unsecuredValidatorRequiredScope": "write"})
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is None
    assert server.principal == "User:carol"


def test_unsecured_validator_refuses_signed_tokens() -> None:
    server = oauthbearer_server({})
    token = jwt.sign_token(claims(), EC_KEY)
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is not None
    assert re.search("alg 'none'", refused(server))


@pytest.mark.parametrize(("key", "kid"), [(RSA_KEY, "rsa1"), (EC_KEY, "ec1"), (EC_KEY, None)])
def test_signed_token_against_jwks_file(jwks_file: str, key: jwt.PrivateKey,
                                        kid: str | None) -> None:
    server = oauthbearer_server(jwks_props(jwks_file))
    token = jwt.sign_token(claims("dave"), key, kid=kid)
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is None
    assert server.principal == "User:dave"


@pytest.mark.parametrize(("make_token", "reason"), [
    (lambda: jwt.sign_token(claims(), OTHER_KEY, kid="ec1"), "signature does not verify"),
    (lambda: jwt.sign_token(claims(), EC_KEY, kid="nope"), "No key in the JWKS"),
    (lambda: jwt.sign_token(claims(iss="https://evil"), EC_KEY), "issuer"),
    (lambda: jwt.sign_token(claims(aud="else"), EC_KEY), "audience"),
    (lambda: jwt.sign_token(claims(life=-120, iat=1), EC_KEY), "expired"),
    (lambda: jwt.sign_token(claims(), RSA_KEY, alg="RS384", kid="rsa1"), "No key"),
    (lambda: jwt.unsecured_token("alice"), "algorithm 'none'"),
    (lambda: jwt.sign_token(claims(), EC_KEY).rsplit(".", 1)[0] + ".AAAA", "signature"),
])
def test_signed_token_refused(jwks_file: str, make_token: object, reason: str) -> None:
    assert callable(make_token)
    server = oauthbearer_server(jwks_props(jwks_file))
    assert run(client_mechanism("OAUTHBEARER", token_cb(make_token())), server) is not None
    assert re.search(reason, refused(server))


def test_clock_skew_is_honoured(jwks_file: str) -> None:
    token = jwt.sign_token(claims(life=-10, iat=int(time.time()) - 60), EC_KEY)  # 10 s ago
    server = oauthbearer_server(jwks_props(jwks_file))
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is None
    strict = oauthbearer_server({**jwks_props(jwks_file),
                                 "sasl.oauthbearer.clock.skew.seconds": "0"})
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), strict) is not None


class IdP(BaseHTTPRequestHandler):
    """A token endpoint (client credentials) and a JWKS, on loopback."""
    requests: list[dict[str, list[str]]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def reply(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.reply(200, {"keys": [jwt.public_jwk(EC_KEY.public_key(), "ec1")]})

    def do_POST(self) -> None:
        form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        IdP.requests.append(form)
        basic = base64.b64encode(b"kaflite:s3cret").decode()
        if self.headers.get("Authorization") != f"Basic {basic}" or \
                form.get("grant_type") != ["client_credentials"]:
            self.reply(401, {"error": "invalid_client"})
            return
        token = jwt.sign_token(claims("svc-" + form.get("scope", ["none"])[0]), EC_KEY, kid="ec1")
        self.reply(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})


@pytest.fixture
def idp() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), IdP)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def oidc_props(url: str, secret: str = "s3cret") -> dict[str, object]:
    return {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "kaflite",
            "sasl.oauthbearer.client.secret": secret, "sasl.oauthbearer.scope": "orders",
            "sasl.oauthbearer.token.endpoint.url": f"{url}/token"}


def test_oidc_client_and_jwks_url(idp: str) -> None:
    IdP.requests.clear()
    for _ in range(2):      # the second connection reuses the cached token
        client = client_mechanism("OAUTHBEARER", oidc_props(idp))
        server = oauthbearer_server(jwks_props(f"{idp}/jwks"))
        assert run(client, server) is None
        assert server.principal == "User:svc-orders"
        assert isinstance(client, OAuthBearerClient) and client.expires_at_ms is not None
    assert IdP.requests == [{"grant_type": ["client_credentials"], "scope": ["orders"]}]
    with pytest.raises(SaslAuthenticationFailed, match="HTTP 401") as info:
        client_mechanism("OAUTHBEARER", oidc_props(idp, "wrong")).start()
    assert "wrong" not in str(info.value)


def test_client_configuration_errors() -> None:
    with pytest.raises(ValueError, match="OAUTHBEARER needs"):
        client_mechanism("OAUTHBEARER", {})
    with pytest.raises(ValueError, match=r"sasl\.oauthbearer\.client\.id"):
        client_mechanism("OAUTHBEARER", {"sasl.oauthbearer.method": "oidc",
                                         "sasl.oauthbearer.token.endpoint.url": "http://x"})
    with pytest.raises(UnsupportedSaslMechanism, match="GSSAPI"):
        client_mechanism("GSSAPI", {})
    with pytest.raises(UnsupportedSaslMechanism, match="GSSAPI"):
        server_mechanism("GSSAPI", STORE, {})


def test_authzid_must_match_the_principal() -> None:
    token = jwt.unsecured_token("alice").encode()
    ok = oauthbearer_server({})
    assert ok.respond(b"n,a=alice,\x01auth=Bearer " + token + b"\x01\x01") == b""
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        oauthbearer_server({}).respond(b"n,a=root,\x01auth=Bearer " + token + b"\x01\x01")


@pytest.mark.parametrize("message", [
    b"", b"n,,", b"n,,\x01auth=Bearer abc\x01", b"n,,\x01auth=Basic abc\x01\x01",
    b"n,,\x01host=x\x01\x01", b"y,,\x01auth=Bearer abc\x01\x01", b"\xff",
    b"n,,\x01auth=Bearer a b\x01\x01", b"n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01",
])
def test_malformed_messages(message: bytes) -> None:
    server = oauthbearer_server({})
    with pytest.raises(IllegalSaslState):
        server.respond(message)
    with pytest.raises(IllegalSaslState):
        server.respond(message)


VALID = b"n,,\x01auth=Bearer " + jwt.unsecured_token("alice", lifetime_s=10**6).encode() \
    + b"\x01\x01"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_messages_fail_cleanly(data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, len(VALID) - 1))
    new = data.draw(st.binary(max_size=3))
    message = VALID[:pos] + new + VALID[pos + data.draw(st.integers(0, 3)):]
    server = oauthbearer_server({})
    try:
        reply = server.respond(message)
    except SaslError:
        assert server.principal is None
        return
    if reply:
        assert json.loads(reply)["status"] == "invalid_token"
        with pytest.raises(SaslAuthenticationFailed):
            server.respond(b"\x01")
    else:
        assert server.principal is not None


def test_jwks_url_must_be_readable(tmp_path: Path) -> None:
    server = oauthbearer_server(jwks_props((tmp_path / "missing.json").as_uri()))
    token = jwt.sign_token(claims(), EC_KEY)
    assert run(client_mechanism("OAUTHBEARER", token_cb(token)), server) is not None
    assert re.search("Could not read the JWKS", refused(server))
