"""SASL/OAUTHBEARER (RFC 7628) as Kafka speaks it, sans I/O (but for fetching a token).

The client's only message is ``n,,\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``;
the server answers with nothing (success) or with RFC 7628's error JSON
(``{"status":"invalid_token"}``), to which the client replies ``\\x01`` and the server
then fails the exchange with ``SaslAuthenticationFailed`` (Kafka's flow). A broker that
wants to fail at once can read ``OAuthBearerServer.failure`` after the first message.

Tokens, on the client (librdkafka's names), from the first of:

* ``oauth_cb``: a callable ``(sasl.oauthbearer.config) -> (token, expiry_s)`` (or
  ``(token, expiry_s, principal, extensions)``), as confluent-kafka's;
* ``sasl.oauthbearer.method=oidc``: a client-credentials grant against
  ``sasl.oauthbearer.token.endpoint.url`` with ``sasl.oauthbearer.client.id``,
  ``sasl.oauthbearer.client.secret`` and ``sasl.oauthbearer.scope`` (HTTP, urllib; the
  token is cached per endpoint and client and renewed at 80% of its lifetime);
* ``sasl.oauthbearer.config`` ``principal=alice [scope=a,b] [lifeSeconds=3600]
  [principalClaimName=sub] [scopeClaimName=scope] [extension_<name>=<value>]``: an
  unsecured development token.

``start()`` may block to fetch a token (callback or HTTP): run it off an event loop.

The server validates, from the broker's configs: without
``sasl.oauthbearer.jwks.endpoint.url``, Kafka's unsecured JWS (``alg: none``, empty
signature; ``unsecuredValidatorPrincipalClaimName`` (``sub``),
``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``,
``unsecuredValidatorAllowableClockSkewMs`` (0)); with it, a signed JWT checked against the
JWKS, ``sasl.oauthbearer.expected.issuer``, ``sasl.oauthbearer.expected.audience``,
``sasl.oauthbearer.sub.claim.name``, ``sasl.oauthbearer.scope.claim.name`` and
``sasl.oauthbearer.clock.skew.seconds`` (30). The token's ``exp`` caps the session
(``expires_at_ms``).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kaflite.security import jwt
from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed

__all__ = ["OAuthBearerClient", "OAuthBearerServer", "TokenValidator", "fetch_oidc_token",
           "oauthbearer_client", "oauthbearer_server"]

log = logging.getLogger("kaflite.security.oauthbearer")
TokenProvider = Callable[[], tuple[str, float, dict[str, str]]]   # token, expiry (s), extensions
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_TOKEN = re.compile(r"[-_.A-Za-z0-9]+")


def _message(token: str, extensions: Mapping[str, str]) -> bytes:
    for key, value in extensions.items():
        if key == "auth" or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise ValueError(f"invalid SASL extension {key!r}")
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,,\x01auth=Bearer {token}\x01{ext}\x01".encode()


class OAuthBearerClient:
    mechanism = "OAUTHBEARER"

    def __init__(self, provider: TokenProvider) -> None:
        self._provider = provider
        self._state = "init"
        self.expires_at_ms: int | None = None     # the token's expiry, once started
        self.error: str | None = None             # the server's error JSON, if any

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def start(self) -> bytes:
        if self._state != "init":
            raise IllegalSaslState("OAUTHBEARER client already started")
        token, expiry_s, extensions = self._provider()
        if not _TOKEN.fullmatch(token):
            raise ValueError("the OAUTHBEARER token holds characters a JWS cannot")
        self.expires_at_ms = int(expiry_s * 1000)
        self._state = "sent"
        return _message(token, extensions)

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state != "sent":
            raise IllegalSaslState(f"OAUTHBEARER client got a message in state {self._state}")
        if not challenge:
            self._state = "complete"
            return None
        self.error = challenge.decode("utf-8", "replace")
        self._state = "failed"
        return b"\x01"      # RFC 7628: acknowledge the error; the server then fails


# -- token providers ------------------------------------------------------------------------

def _kv(text: str, sep: str) -> dict[str, str]:
    out = {}
    for item in text.split(sep):
        key, eq, value = item.strip().partition("=")
        if eq and key:
            out[key] = value
    return out


def _callback_provider(callback: Callable[..., object], config: str,
                       extensions: dict[str, str]) -> TokenProvider:
    def provide() -> tuple[str, float, dict[str, str]]:
        result = callback(config)
        if not isinstance(result, tuple) or len(result) not in (2, 4):
            raise ValueError("oauth_cb must return (token, expiry_s) or "
                             "(token, expiry_s, principal, extensions)")
        ext = dict(extensions)
        if len(result) == 4 and isinstance(result[3], Mapping):
            ext.update({str(k): str(v) for k, v in result[3].items()})
        return str(result[0]), float(result[1]), ext
    return provide


_oidc_lock = threading.Lock()
_oidc_cache: dict[tuple[str, str, str, str], tuple[str, float, float]] = {}


def fetch_oidc_token(url: str, client_id: str, client_secret: str, scope: str = "", *,
                     timeout_s: float = 30.0) -> tuple[str, float]:
    """A client-credentials grant (RFC 6749 4.4): (access token, expiry in epoch seconds)."""
    form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    quote = urllib.parse.quote
    basic = base64.b64encode(f"{quote(client_id)}:{quote(client_secret)}".encode()).decode()
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded"})
    now = time.time()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise SaslAuthenticationFailed(
            f"The token endpoint {url} answered HTTP {exc.code} {exc.reason}") from None
    except OSError as exc:
        raise SaslAuthenticationFailed(f"Could not reach the token endpoint {url}: {exc}") \
            from None
    try:
        doc = json.loads(body)
        token = doc["access_token"]
    except (ValueError, KeyError, TypeError):
        raise SaslAuthenticationFailed(
            f"The token endpoint {url} answered without an access_token") from None
    if not isinstance(token, str):
        raise SaslAuthenticationFailed(f"The token endpoint {url} answered a bad access_token")
    expires_in = doc.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        return token, now + float(expires_in)
    try:
        exp = jwt.decode(token)[1].get("exp")
    except jwt.TokenError:
        exp = None
    return token, float(exp) if isinstance(exp, int | float) else now + 3600.0


def _oidc_provider(props: Mapping[str, object], extensions: dict[str, str]) -> TokenProvider:
    def need(name: str) -> str:
        value = props.get(name)
        if not value:
            raise ValueError(f"{name} must be set for sasl.oauthbearer.method=oidc")
        return str(value)
    key = (need("sasl.oauthbearer.token.endpoint.url"), need("sasl.oauthbearer.client.id"),
           need("sasl.oauthbearer.client.secret"), str(props.get("sasl.oauthbearer.scope") or ""))

    def provide() -> tuple[str, float, dict[str, str]]:
        with _oidc_lock:
            cached = _oidc_cache.get(key)
            now = time.time()
            if cached is None or now >= cached[2] + 0.8 * (cached[1] - cached[2]):
                token, expiry = fetch_oidc_token(*key)
                cached = _oidc_cache[key] = (token, expiry, now)
        return cached[0], cached[1], dict(extensions)
    return provide


def _unsecured_provider(config: str, extensions: dict[str, str]) -> TokenProvider:
    options = _kv(config, " ")
    principal = options.get("principal")
    if not principal:
        raise ValueError("sasl.oauthbearer.config needs principal=<name> for an unsecured token")
    life = int(options.get("lifeSeconds", "3600"))
    scope = [s for s in options.get("scope", "").split(",") if s]
    ext = dict(extensions)
    ext.update({k[len("extension_"):]: v for k, v in options.items()
                if k.startswith("extension_")})

    def provide() -> tuple[str, float, dict[str, str]]:
        now = time.time()
        token = jwt.unsecured_token(
            principal, lifetime_s=life, scope=scope, now_s=now,
            principal_claim=options.get("principalClaimName", "sub"),
            scope_claim=options.get("scopeClaimName", "scope"))
        return token, float(int(now) + life), ext
    return provide


def oauthbearer_client(props: Mapping[str, object]) -> OAuthBearerClient:
    """An OAUTHBEARER client from librdkafka's properties (see the module's docstring)."""
    extensions = _kv(str(props.get("sasl.oauthbearer.extensions") or ""), ",")
    config = str(props.get("sasl.oauthbearer.config") or "")
    callback = props.get("oauth_cb")
    if callback is not None:
        if not callable(callback):
            raise ValueError("oauth_cb must be callable")
        return OAuthBearerClient(_callback_provider(callback, config, extensions))
    if str(props.get("sasl.oauthbearer.method") or "default").lower() == "oidc":
        return OAuthBearerClient(_oidc_provider(props, extensions))
    if config:
        return OAuthBearerClient(_unsecured_provider(config, extensions))
    raise ValueError("OAUTHBEARER needs oauth_cb, sasl.oauthbearer.method=oidc, or "
                     "sasl.oauthbearer.config=principal=<name> (an unsecured token)")


# -- server ---------------------------------------------------------------------------------

class ScopeError(jwt.TokenError):
    """The token lacks a scope the broker requires (RFC 7628's insufficient_scope)."""


@dataclass(frozen=True)
class Validated:
    principal: str
    expires_at_ms: int
    scope: tuple[str, ...]


class TokenValidator:
    """Kafka's unsecured JWS validator, or signed JWTs against a JWKS (module docstring)."""

    def __init__(self, props: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        url = props.get("sasl.oauthbearer.jwks.endpoint.url") or ""
        self._jwks = _jwks(url, int(props.get("sasl.oauthbearer.jwks.endpoint.refresh.ms",
                                              "3600000"))) if url else None
        if self._jwks is None:
            self._sub = props.get("unsecuredValidatorPrincipalClaimName") or \
                props.get("sasl.oauthbearer.sub.claim.name") or "sub"
            self._scope = props.get("unsecuredValidatorScopeClaimName") or \
                props.get("sasl.oauthbearer.scope.claim.name") or "scope"
            self._skew_s = int(props.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
            required = props.get("unsecuredValidatorRequiredScope", "")
            self._required = tuple(s for s in re.split(r"[ ,]+", required) if s)
        else:
            self._sub = props.get("sasl.oauthbearer.sub.claim.name") or "sub"
            self._scope = props.get("sasl.oauthbearer.scope.claim.name") or "scope"
            self._skew_s = float(props.get("sasl.oauthbearer.clock.skew.seconds", "30"))
            self._required = ()
        self._issuer = props.get("sasl.oauthbearer.expected.issuer") or None
        self._audience = tuple(a.strip() for a in
                               (props.get("sasl.oauthbearer.expected.audience") or "").split(",")
                               if a.strip())

    def validate(self, token: str) -> Validated:
        """The token's principal, expiry and scope; ``jwt.TokenError`` when it is refused."""
        header, claims, signing_input, signature = jwt.decode(token)
        alg = header.get("alg")
        if self._jwks is None:
            if alg != "none":
                raise jwt.TokenError(f"Unsecured JWS requires alg 'none', found {alg!r}")
            if signature:
                raise jwt.TokenError("An unsecured JWS must have an empty signature")
        else:
            if not isinstance(alg, str) or alg not in jwt.ALGORITHMS:
                raise jwt.TokenError(f"Unsupported JWS algorithm {alg!r}")
            kid = header.get("kid")
            keys = self._jwks.keys_for(kid if isinstance(kid, str) else None, alg)
            if not any(jwt.verify_signature(alg, k, signing_input, signature) for k in keys):
                raise jwt.TokenError("The token's signature does not verify")
        exp = jwt.check_times(claims, now_s=self._clock(), skew_s=self._skew_s)
        principal = claims.get(self._sub)
        if not isinstance(principal, str) or not principal.strip():
            raise jwt.TokenError(f"The token has no {self._sub!r} claim naming its principal")
        if self._issuer is not None and claims.get("iss") != self._issuer:
            raise jwt.TokenError(f"The token's issuer is not {self._issuer!r}")
        if self._audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(a in self._audience for a in auds):
                raise jwt.TokenError("The token's audience is not one that is expected")
        raw_scope = claims.get(self._scope)
        scope = tuple(raw_scope.split()) if isinstance(raw_scope, str) else \
            tuple(str(s) for s in raw_scope) if isinstance(raw_scope, list) else ()
        missing = [s for s in self._required if s not in scope]
        if missing:
            raise ScopeError(f"The token lacks the required scope {' '.join(missing)}")
        return Validated(principal, int(exp * 1000), scope)


_jwks_lock = threading.Lock()
_jwks_cache: dict[tuple[str, int], jwt.Jwks] = {}


def _jwks(url: str, refresh_ms: int) -> jwt.Jwks:
    """One key set per URL in the process, so each connection does not re-read it."""
    with _jwks_lock:
        return _jwks_cache.setdefault((url, refresh_ms), jwt.Jwks(url, refresh_ms=refresh_ms))


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._state = "init"
        self._validated: Validated | None = None
        self.failure: str | None = None     # the error: the challenge sent, and the reason
        self.reason: str | None = None      # why the token was refused
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def principal(self) -> str | None:
        return f"User:{self._validated.principal}" if self._validated and self.complete \
            else None

    @property
    def expires_at_ms(self) -> int | None:
        return self._validated.expires_at_ms if self._validated and self.complete else None

    def respond(self, message: bytes) -> bytes:
        if self._state == "error_sent":
            self._state = "failed"
            raise SaslAuthenticationFailed(self.failure or "Authentication failed")
        if self._state != "init":
            raise IllegalSaslState(f"Unexpected OAUTHBEARER message in state {self._state}")
        self._state = "failed"
        authzid, token, self.extensions = _parse_initial(message)
        try:
            validated = self._validator.validate(token)
        except jwt.TokenError as exc:
            # The error starts with the error challenge, which is all of Kafka's
            # OAuthBearerSaslServer's error (clients look for the status in it: franz-go's
            # TestOAuthAuth); kaflite adds why the token was refused.
            status = "insufficient_scope" if isinstance(exc, ScopeError) else "invalid_token"
            challenge = json.dumps({"status": status}, separators=(",", ":"))
            log.info("OAUTHBEARER token refused (%s): %s", status, exc)
            self.failure, self.reason = f"{challenge}: {exc}", str(exc)
            self._state = "error_sent"
            return challenge.encode()
        if authzid and authzid != validated.principal:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from the token's principal name")
        self._validated, self._state = validated, "complete"
        return b""


def _parse_initial(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, token, extensions) of the client's message; IllegalSaslState if malformed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise IllegalSaslState("Invalid OAUTHBEARER client first message: not UTF-8") from None
    match = re.fullmatch(r"n,(?:a=([^,\x01]*))?,\x01((?:[^\x01]*\x01)*)\x01", text)
    if match is None:
        raise IllegalSaslState("Invalid OAUTHBEARER client first message")
    authzid = (match.group(1) or "").replace("=2C", ",").replace("=3D", "=")
    pairs: dict[str, str] = {}
    for item in match.group(2).split("\x01")[:-1]:
        key, eq, value = item.partition("=")
        if not eq or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value) or key in pairs:
            raise IllegalSaslState("Invalid OAUTHBEARER key/value pair in the client message")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    parts = (auth or "").split(" ")
    if len(parts) != 2 or parts[0].lower() != "bearer" or not _TOKEN.fullmatch(parts[1]):
        raise IllegalSaslState("Invalid OAUTHBEARER auth value: expected 'Bearer <token>'")
    return authzid, parts[1], pairs


def oauthbearer_server(props: Mapping[str, str],
                       clock: Callable[[], float] = time.time) -> OAuthBearerServer:
    return OAuthBearerServer(TokenValidator(props, clock))
