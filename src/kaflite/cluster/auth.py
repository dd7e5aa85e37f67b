"""The broker's side of authentication: TLS contexts, users, and each connection's
SASL session (KIP-43 handshake, KIP-152 SaslAuthenticate, KIP-368 re-authentication).

TLS (SSL and SASL_SSL listeners), with Kafka's PEM config names, each of which may
be given per listener as ``listener.name.<listener>.<name>``:

* ``ssl.keystore.type=PEM`` with ``ssl.keystore.location``: one PEM file holding
  the private key and the certificate chain; or ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain`` holding the PEM text itself;
  ``ssl.key.password`` when the key is encrypted;
* ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` (or
  ``ssl.truststore.certificates``, the PEM text): the CAs client certificates
  must chain to;
* ``ssl.client.auth``: none (default), requested or required. On an SSL listener
  the principal is the client certificate's subject (``User:CN=...``), as Kafka's
  default principal builder makes it.

SASL (SASL_PLAINTEXT and SASL_SSL listeners):

* ``sasl.enabled.mechanisms`` (per listener too). Kafka's default is GSSAPI,
  which kaflite does not have: kaflite enables PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER unless told otherwise.
* PLAIN users come from Kafka's JAAS config,
  ``listener.name.<listener>.plain.sasl.jaas.config`` (or ``sasl.jaas.config``)
  with ``user_<name>="<password>"`` options, and from kaflite's own
  ``sasl.users=alice:secret,bob:secret`` (PLAIN and both SCRAMs, derived in
  memory at start).
* SCRAM credentials live in the controller's metadata
  (AlterUserScramCredentials, ``kaflite users``) and survive restarts; so do
  delegation tokens (``kaflite.cluster.delegation_tokens``), with which a client
  logs in over SCRAM (``tokenauth=true``) as the token's owner.
* ``connections.max.reauth.ms`` (0: sessions never expire) caps a session; an
  OAUTHBEARER token's expiry caps it too.

Between brokers (replica fetchers, the transaction marker sender), on the
``inter.broker.listener.name`` listener: ``sasl.mechanism.inter.broker.protocol``
(Kafka's default is GSSAPI; kaflite's is PLAIN, or the listener's first enabled
mechanism) with the ``username``/``password`` of that listener's JAAS config for
the mechanism (else the first ``sasl.users`` user); over TLS the broker trusts
``ssl.truststore.location`` and, where the listener wants client certificates,
presents its own keystore, as Kafka's brokers do.

Nothing here logs a password or a token.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from kaflite.cluster import delegation_tokens
from kaflite.cluster.listeners import listener_config
from kaflite.config import ConfigError
from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed
from kaflite.security.sasl import (
    MECHANISMS,
    SaslClient,
    SaslServer,
    client_mechanism,
    server_mechanism,
)
from kaflite.security.scram import (
    HASHES,
    CredentialStore,
    ScramCredential,
    TokenCredential,
    scram_credential,
)
from kaflite.security.tls import server_context

if TYPE_CHECKING:
    from kaflite.cluster.controller import Controller
    from kaflite.cluster.listeners import ListenerSpec

__all__ = [
    "BrokerCredentials",
    "SaslSession",
    "enabled_mechanisms",
    "inter_broker_security",
    "jaas_options",
    "listener_props",
    "listener_ssl_context",
    "pem_file",
]

# Requests served before authentication completes (and during a re-authentication).
SASL_APIS = frozenset({17, 18, 36})    # SaslHandshake, ApiVersions, SaslAuthenticate
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


# -- TLS ---------------------------------------------------------------------------
@contextlib.contextmanager
def pem_file(text: str) -> Iterator[str]:
    """PEM text in a private temporary file, for ``ssl``'s file-only loaders."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def listener_ssl_context(props: Mapping[str, str], listener: str) -> ssl.SSLContext:
    def get(name: str) -> str | None:
        return listener_config(props, listener, name)

    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(kind) or "PEM").upper() != "PEM":
            raise ConfigError(kind, f"{kind}={get(kind)}: kaflite reads PEM files only")
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError("ssl.client.auth", f"Invalid value {client_auth} for ssl.client.auth")
    with contextlib.ExitStack() as stack:
        location = get("ssl.keystore.location")
        if location is None and get("ssl.keystore.certificate.chain") is not None:
            chain = stack.enter_context(pem_file(get("ssl.keystore.certificate.chain") or ""))
            key = stack.enter_context(pem_file(get("ssl.keystore.key") or ""))
        elif location is not None:
            chain = key = location
        else:
            raise ConfigError("ssl.keystore.location",
                              f"listener {listener} uses TLS: set ssl.keystore.location "
                              "(a PEM file with the key and certificate chain)")
        cafile = get("ssl.truststore.location")
        if cafile is None and get("ssl.truststore.certificates") is not None:
            cafile = stack.enter_context(pem_file(get("ssl.truststore.certificates") or ""))
        try:
            return server_context(chain, key, key_password=get("ssl.key.password"),
                                  cafile=cafile, client_auth=client_auth)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl.keystore.location",
                              f"listener {listener}: cannot load its certificate or key: "
                              f"{exc.__class__.__name__}") from None


# -- users -------------------------------------------------------------------------
def jaas_options(text: str) -> dict[str, str]:
    """The options of a JAAS login module line: ``Module required a="1" b="2";``."""
    _, _, rest = text.partition(" ")
    return {m.group(1): (m.group(2).replace('\\"', '"') if m.group(2) is not None
                         else m.group(3))
            for m in _JAAS_OPTION.finditer(rest)}


def jaas_config(props: Mapping[str, str], listener: str, mechanism: str) -> dict[str, str]:
    text = props.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config") \
        or listener_config(props, listener, "sasl.jaas.config")
    return jaas_options(text) if text else {}


def config_users(props: Mapping[str, str]) -> dict[str, str]:
    """kaflite's ``sasl.users=alice:secret,bob:secret``."""
    users: dict[str, str] = {}
    for item in (props.get("sasl.users") or "").split(","):
        name, sep, password = item.strip().partition(":")
        if item.strip() and (not sep or not name):
            raise ConfigError("sasl.users", "sasl.users takes user:password,...")
        if name:
            users[name] = password
    return users


def enabled_mechanisms(props: Mapping[str, str], listener: str) -> list[str]:
    value = listener_config(props, listener, "sasl.enabled.mechanisms")
    if value is None:
        return list(MECHANISMS)
    return [m.strip().upper() for m in value.split(",") if m.strip()]


def listener_props(props: Mapping[str, str], listener: str, mechanism: str) -> dict[str, str]:
    """The broker's configs as one listener and mechanism see them (prefixes applied)."""
    out = dict(props)
    for prefix in (f"listener.name.{listener.lower()}.",
                   f"listener.name.{listener.lower()}.{mechanism.lower()}."):
        out.update({k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)})
    return out


class BrokerCredentials:
    """The ``CredentialStore`` of one listener: SCRAM from the controller, then
    ``sasl.users``; PLAIN from the listener's JAAS config, then ``sasl.users``."""

    def __init__(self, controller: Controller, props: Mapping[str, str], listener: str) -> None:
        self.controller = controller
        self.jaas = {k[5:]: v for k, v in jaas_config(props, listener, "PLAIN").items()
                     if k.startswith("user_")}
        self.users = config_users(props)
        self.token_secret = props.get(delegation_tokens.SECRET_KEY) or None
        self._derived: dict[tuple[str, str], ScramCredential] = {}

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        stored = self.controller.scram_credential(user, mechanism)
        if stored is not None or user not in self.users or mechanism not in HASHES:
            return stored
        key = (user, mechanism)
        if key not in self._derived:
            self._derived[key] = scram_credential(mechanism, self.users[user])
        return self._derived[key]

    def plain(self, user: str) -> str | None:
        return self.jaas.get(user, self.users.get(user))

    def token(self, token_id: str, mechanism: str) -> TokenCredential | None:
        """A delegation token's login (SCRAM with ``tokenauth=true``): the token must be
        in the metadata and tokens enabled (``delegation.token.secret.key``)."""
        info = self.controller.tokens.get(token_id)
        if info is None or not self.token_secret or mechanism not in HASHES:
            return None
        credential = delegation_tokens.token_credential(self.token_secret, token_id, mechanism)
        return TokenCredential(credential, info.owner.partition(":")[2], info.expiry_ms)


# -- between brokers -----------------------------------------------------------------
def inter_broker_security(props: Mapping[str, str], spec: ListenerSpec
                          ) -> tuple[ssl.SSLContext | None, Callable[[], SaslClient] | None]:
    """The TLS context and SASL client factory a broker connects to others with."""
    context = None
    if spec.tls:
        from kaflite.security.tls import client_context

        def get(name: str) -> str | None:
            return listener_config(props, spec.name, name)

        client: dict[str, object] = {
            "ssl.ca.location": get("ssl.truststore.location"),
            "ssl.endpoint.identification.algorithm":
                get("ssl.endpoint.identification.algorithm") or "https"}
        keystore = get("ssl.keystore.location")
        if (get("ssl.client.auth") or "none").lower() != "none" and keystore:
            client |= {"ssl.certificate.location": keystore, "ssl.key.location": keystore,
                       "ssl.key.password": get("ssl.key.password")}
        context = client_context({k: v for k, v in client.items() if v is not None})
    if not spec.sasl:
        return context, None
    enabled = enabled_mechanisms(props, spec.name)
    mechanism = (props.get("sasl.mechanism.inter.broker.protocol")
                 or ("PLAIN" if "PLAIN" in enabled else enabled[0])).upper()
    options = jaas_config(props, spec.name, mechanism)
    user, password = options.get("username"), options.get("password")
    if user is None:
        user, password = next(iter(config_users(props).items()), (None, None))
    if user is None or password is None:
        raise ConfigError("sasl.jaas.config",
                          f"the inter-broker listener {spec.name} uses SASL: set username and "
                          f"password in listener.name.{spec.name.lower()}."
                          f"{mechanism.lower()}.sasl.jaas.config (or sasl.users)")
    credentials = {"sasl.username": user, "sasl.password": password}

    def factory() -> SaslClient:
        return client_mechanism(mechanism, credentials)

    return context, factory


# -- one connection's session ------------------------------------------------------
class SaslSession:
    """The SASL state of one connection of a SASL listener (a broker's, with
    ``BrokerCredentials``, or the proxy's, with the users it was given).

    ``refuse(api_key)`` says why a request may not be served now (None: it may):
    before authentication only ApiVersions, SaslHandshake and SaslAuthenticate
    are; after the session expired (KIP-368) only a re-authentication is.
    """

    def __init__(self, store: CredentialStore, props: Mapping[str, str], listener: str) -> None:
        self.props = props
        self.listener = listener
        self.enabled = enabled_mechanisms(props, listener)
        self.store = store
        reauth = listener_config(props, listener, "connections.max.reauth.ms")
        self.max_reauth_ms = int(reauth) if reauth else 0
        self.server: SaslServer | None = None      # the exchange under way
        self.mechanism: str | None = None          # of the current session
        self.principal: str | None = None
        self.token_authenticated = False           # logged in with a delegation token
        self.expires_at: float | None = None       # time.time() seconds; None: never
        self.raw = False      # SaslHandshake v0: the next frames are bare SASL tokens
        self.authentications = 0

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at

    def refuse(self, api_key: int, api_name: str) -> str | None:
        if api_key in SASL_APIS:
            return None
        if not self.authenticated:
            return f"{api_name} before SASL authentication completed"
        if self.expired():
            return "the SASL session expired and the client did not re-authenticate"
        return None

    def handshake(self, mechanism: str, version: int) -> bool:
        """A SaslHandshake: True when ``mechanism`` is enabled (an exchange starts)."""
        if self.server is not None and not self.server.complete:
            raise IllegalSaslState("SaslHandshake during an unfinished SASL exchange")
        if mechanism not in self.enabled:
            return False
        if self.authenticated and mechanism != self.mechanism:
            raise IllegalSaslState(f"re-authentication must use {self.mechanism}, "
                                   f"not {mechanism}")
        self.server = server_mechanism(mechanism, self.store,
                                       listener_props(self.props, self.listener, mechanism))
        self.raw = version == 0
        return True

    def authenticate(self, auth_bytes: bytes) -> tuple[bytes, int]:
        """A SaslAuthenticate: the reply bytes and, once the exchange completes,
        the session lifetime in ms (0 while it is still going, or with no limit).
        Raises ``SaslAuthenticationFailed`` or ``IllegalSaslState``."""
        server = self.server
        if server is None or server.complete:
            raise IllegalSaslState("SaslAuthenticate without a SaslHandshake first")
        reply = server.respond(auth_bytes)
        if not server.complete:
            return reply, 0
        principal = server.principal
        if principal is None:
            raise SaslAuthenticationFailed("Authentication failed: no principal")
        if self.authenticated and principal != self.principal:
            raise SaslAuthenticationFailed("Cannot change principals during re-authentication "
                                           f"from {self.principal}: {principal}")
        now_ms = int(time.time() * 1000)
        limits = []
        if self.max_reauth_ms > 0:
            limits.append(self.max_reauth_ms)
        if server.expires_at_ms is not None:
            if server.expires_at_ms <= now_ms:
                raise SaslAuthenticationFailed("Authentication failed: the token expired")
            limits.append(server.expires_at_ms - now_ms)
        lifetime = min(limits) if limits else 0
        self.principal, self.mechanism = principal, server.mechanism
        self.token_authenticated = bool(getattr(server, "token_authenticated", False))
        self.expires_at = (now_ms + lifetime) / 1000 if lifetime else None
        self.raw = False
        self.authentications += 1
        return reply, lifetime
