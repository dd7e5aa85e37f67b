"""A broker's TLS listeners, whose keystore and truststore change while it runs.

As Kafka's brokers rotate certificates without a restart (KIP-226): a per-broker
dynamic config ``listener.name.<listener>.ssl.keystore.location`` (or any other of
Kafka's reconfigurable SSL configs, ``LISTENER_LEVEL_ONLY``: the keystore's type,
location, password, key password and inline PEM key and chain, the truststore's
type, location, password and inline certificates) gives an SSL or SASL_SSL listener
new key material. The broker that takes the AlterConfigs request checks it as Kafka's
``SslFactory`` does, and refuses it (INVALID_REQUEST, Kafka's message) when:

* the new keystore or truststore does not load (a missing file, a wrong
  ``ssl.key.password``: "Failed to load PEM SSL keystore <path>"), or breaks one of
  Kafka's rules (a keystore password with a PEM store ...);
* the keystore goes away, or a truststore comes where there was none;
* on the inter-broker listener, a broker with the old stores and one with the new
  ones could not complete a handshake with each other, either way round (the
  reason is OpenSSL's, not Java's);
* the new certificate's subject differs from the old one's, unless
  ``ssl.allow.dn.changes=true`` (a static config); or it lacks one of the old
  certificate's SubjectAltNames, unless ``ssl.allow.san.changes=true``.

Once stored, the listener hands the new context to every new handshake (the
context given to the server switches each handshake to the current one from its
SNI callback, which OpenSSL calls for every ClientHello); connections already open
keep theirs. Setting the same values again re-reads a store file whose modification
time changed, as Kafka does; that re-read is not checked at request time (Kafka's
isn't either): when it fails the broker logs it and keeps the old context.

A listener that is not SSL or SASL_SSL, or a name no listener has, takes the configs
as Kafka does: stored, and of no effect. A restarted broker starts with the stored
values (if they no longer load, it logs that and uses its static configs).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509

from kaflite.cluster._kafka_broker_configs import LISTENER_LEVEL_ONLY
from kaflite.cluster.auth import listener_ssl_context, pem_file
from kaflite.cluster.dynamic_configs import DEFAULT
from kaflite.cluster.listeners import ListenerSpec, listener_config
from kaflite.config import ConfigError
from kaflite.protocol import errors
from kaflite.security.tls import CLIENT_AUTH, server_context

__all__ = ["BrokerTls", "Staged", "StoreError", "effective_props", "handshake_error"]

log = logging.getLogger("kaflite.cluster.listener_tls")

RECONFIGURABLE = tuple(sorted(LISTENER_LEVEL_ONLY))
_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")
_CONFIG_EXCEPTION = "org.apache.kafka.common.config.ConfigException"
_INVALID_CONFIG = "org.apache.kafka.common.errors.InvalidConfigurationException"


class StoreError(Exception):
    """Why Kafka's ``SslFactory`` refuses new key material: its exception's class and
    message."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(message)
        self.java_class, self.message = java_class, message

    def refusal(self) -> errors.InvalidRequestError:
        """The AlterConfigs error a Kafka 4.4 broker answers with: the SslFactory's
        exception inside ``DynamicBrokerConfig``'s "Invalid dynamic configuration"."""
        inner = (f"Validation of dynamic config update of SSLFactory failed: "
                 f"{self.java_class}: {self.message}")
        return errors.InvalidRequestError(
            f"Invalid value {_CONFIG_EXCEPTION}: {inner} "
            "for configuration Invalid dynamic configuration")


def effective_props(static: Mapping[str, str], store: Mapping[str, Mapping[str, str]],
                    node_id: int) -> dict[str, str]:
    """Broker ``node_id``'s configs as its TLS listeners see them: the static ones, then
    the dynamic per-listener SSL configs (the cluster-wide ones, then its own)."""
    out = dict(static)
    for layer in (store.get(DEFAULT, {}), store.get(str(node_id), {})):
        for key, value in layer.items():
            match = _PREFIXED.fullmatch(key)
            if match is not None and match.group(1) in LISTENER_LEVEL_ONLY:
                out[key] = value
    return out


# -- the certificate's identity -----------------------------------------------------
_SAN_TYPES: dict[type[x509.GeneralName], int] = {
    x509.RFC822Name: 1, x509.DNSName: 2, x509.DirectoryName: 4,
    x509.UniformResourceIdentifier: 6, x509.IPAddress: 7, x509.RegisteredID: 8}


def _java_dn(name: x509.Name) -> str:
    """The subject as Java's ``X500Principal.toString()`` prints it."""
    return ", ".join(rdn.rfc4514_string() for rdn in reversed(name.rdns))


def _san_value(general: x509.GeneralName) -> str:
    value = general.value
    if isinstance(general, x509.IPAddress):
        return str(value)
    if isinstance(general, x509.DirectoryName):
        return str(value.rfc4514_string())
    if isinstance(general, x509.RegisteredID):
        return str(value.dotted_string)
    if isinstance(general, x509.OtherName):
        return bytes(value).hex()
    return str(value)


@dataclass(frozen=True)
class Identity:
    """What Kafka compares of the old and the new keystore's certificate."""

    subject: x509.Name
    sans: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, cert: x509.Certificate) -> Identity:
        try:
            ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            names = [(_SAN_TYPES.get(type(g), 0), _san_value(g)) for g in ext.value]
        except x509.ExtensionNotFound:
            names = []
        return cls(cert.subject, tuple(dict.fromkeys(names)))

    @property
    def dn(self) -> str:
        return _java_dn(self.subject)

    @property
    def san_text(self) -> str:
        return "[" + ", ".join(f"[{kind}, {value}]" for kind, value in self.sans) + "]"


def check_compatible(old: Identity, new: Identity, *, allow_dn: bool, allow_san: bool) -> None:
    """Kafka's ``SslFactory.CertificateEntries.ensureCompatible`` for a PEM keystore
    (one entry, alias ``kafka``): the same subject, and every old SubjectAltName kept."""
    if not allow_dn and old.subject != new.subject and \
            old.subject.rfc4514_string().lower() != new.subject.rfc4514_string().lower():
        raise StoreError(_CONFIG_EXCEPTION,
                         "Keystore DistinguishedName does not match:  "
                         f"existing={{alias=kafka, DN={old.dn}}}, "
                         f"new={{alias=kafka, DN={new.dn}}}")
    if not allow_san and not set(old.sans) <= set(new.sans):
        raise StoreError(_CONFIG_EXCEPTION,
                         "Keystore SubjectAltNames do not match:  "
                         f"existing={{alias=kafka, SAN={old.san_text}}}, "
                         f"new={{alias=kafka, SAN={new.san_text}}}")


# -- loading key material -------------------------------------------------------------
def _mtime(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


@dataclass(frozen=True)
class Material:
    """One build of a listener's context, with what it was built from."""

    values: tuple[tuple[str, str | None], ...]
    stamps: tuple[int | None, int | None]     # the store files' modification times
    context: ssl.SSLContext
    identity: Identity
    has_truststore: bool

    def files_changed(self) -> bool:
        get = dict(self.values).get
        return self.stamps != (_mtime(get("ssl.keystore.location")),
                               _mtime(get("ssl.truststore.location")))


def _values(props: Mapping[str, str], listener: str) -> tuple[tuple[str, str | None], ...]:
    return tuple((name, listener_config(props, listener, name)) for name in RECONFIGURABLE)


def _check_rules(get: Callable[[str], str | None]) -> None:
    """Kafka's ``DefaultSslEngineFactory.createKeystore``/``createTruststore`` rules."""
    ks_type = (get("ssl.keystore.type") or "PEM").upper()
    location, password = get("ssl.keystore.location"), get("ssl.keystore.password")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    if key is not None:
        if ks_type != "PEM":
            raise StoreError(_INVALID_CONFIG, "SSL private key can be specified only for "
                                              f"PEM, but key store type is {ks_type}.")
        if chain is None:
            raise StoreError(_INVALID_CONFIG, "SSL private key is specified, but certificate "
                                              "chain is not specified.")
        if location is not None:
            raise StoreError(_INVALID_CONFIG, "Both SSL key store location and separate "
                                              "private key are specified.")
        if password is not None:
            raise StoreError(_INVALID_CONFIG, "SSL key store password cannot be specified "
                                              "with PEM format, only key password may be "
                                              "specified.")
    elif chain is not None:
        raise StoreError(_INVALID_CONFIG, "SSL certificate chain is specified, but private "
                                          "key is not specified")
    elif location is not None and password is not None:
        raise StoreError(_INVALID_CONFIG, "SSL key store password cannot be specified with "
                                          "PEM format, only key password may be specified")
    elif location is None:
        if password is not None:
            raise StoreError(_INVALID_CONFIG, "SSL key store is not specified, but key "
                                              "store password is specified.")
        raise StoreError(_CONFIG_EXCEPTION, "Cannot remove the SSL keystore from an existing "
                                            "listener for which a keystore was configured.")
    ts_type = (get("ssl.truststore.type") or "PEM").upper()
    ts_location, ts_password = get("ssl.truststore.location"), get("ssl.truststore.password")
    if get("ssl.truststore.certificates") is not None:
        if ts_type != "PEM":
            raise StoreError(_INVALID_CONFIG, "SSL trust store certs can be specified only "
                                              f"for PEM, but trust store type is {ts_type}.")
        if ts_location is not None:
            raise StoreError(_INVALID_CONFIG, "Both SSL trust store location and separate "
                                              "trust certificates are specified.")
    if ts_password is not None:
        raise StoreError(_INVALID_CONFIG,
                         "SSL trust store password cannot be specified for PEM format."
                         if ts_location is not None or get("ssl.truststore.certificates")
                         else "SSL trust store is not specified, but trust store password "
                              "is specified.")
    if ks_type != "PEM" or ts_type != "PEM":   # a limit of kaflite's, not a rule of Kafka's
        kind = "ssl.keystore.type" if ks_type != "PEM" else "ssl.truststore.type"
        raise StoreError(_INVALID_CONFIG, f"{kind}={get(kind)}: kaflite reads PEM stores only")


@contextlib.contextmanager
def _store_files(get: Callable[[str], str | None]) -> Iterator[tuple[str, str, str | None]]:
    """The keystore's chain and key files, and the truststore's file (or None)."""
    with contextlib.ExitStack() as stack:
        location = get("ssl.keystore.location")
        if location is not None:
            chain = key = location
        else:
            chain = stack.enter_context(pem_file(get("ssl.keystore.certificate.chain") or ""))
            key = stack.enter_context(pem_file(get("ssl.keystore.key") or ""))
        trust = get("ssl.truststore.location")
        if trust is None and get("ssl.truststore.certificates") is not None:
            trust = stack.enter_context(pem_file(get("ssl.truststore.certificates") or ""))
        yield chain, key, trust


def build(props: Mapping[str, str], listener: str) -> Material:
    """A listener's context from ``props``, refused (``StoreError``) as Kafka refuses it."""
    def get(name: str) -> str | None:
        return listener_config(props, listener, name)

    _check_rules(get)
    location = get("ssl.keystore.location")
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        client_auth = "none"     # Kafka falls back to NONE, and so does the check here
    keystore_failure = StoreError(_INVALID_CONFIG, f"Failed to load PEM SSL keystore {location}"
                                  if location is not None else "Invalid PEM keystore configs")
    with _store_files(get) as (chain, key, trust):
        try:
            context = server_context(chain, key, key_password=get("ssl.key.password") or "",
                                     client_auth=client_auth)
            with open(chain, "rb") as f:
                cert = x509.load_pem_x509_certificates(f.read())[0]
        except (OSError, ValueError, ssl.SSLError):
            raise keystore_failure from None
        if trust is not None:
            try:
                context.load_verify_locations(cafile=trust)
            except (OSError, ValueError, ssl.SSLError):
                raise StoreError(
                    _INVALID_CONFIG, f"Failed to load PEM SSL keystore {trust}"
                    if get("ssl.truststore.location") is not None
                    else "Invalid PEM truststore configs") from None
    return Material(_values(props, listener),
                    (_mtime(location), _mtime(get("ssl.truststore.location"))),
                    context, Identity.of(cert), trust is not None)


def _validation_client(values: Mapping[str, str | None]) -> ssl.SSLContext:
    """The client end of Kafka's handshake check: the store's truststore (else the
    system's CAs), its keystore presented, no host name check."""
    with _store_files(values.get) as (chain, key, trust):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        if trust is not None:
            ctx.load_verify_locations(cafile=trust)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        ctx.load_cert_chain(chain, key, password=values.get("ssl.key.password") or "")
    return ctx


def handshake_error(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """Why a client with ``client`` cannot complete a TLS handshake with a server with
    ``server`` (in memory, a bounded number of flights); None when it can."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    ends = [(client.wrap_bio(c_in, c_out, server_side=False), c_out, s_in),
            (server.wrap_bio(s_in, s_out, server_side=True), s_out, c_in)]
    done = [False, False]
    for _ in range(16):
        for i, (end, out, peer) in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as exc:
                    return str(exc.reason or exc)
            if out.pending:
                peer.write(out.read())
        if all(done) and not s_out.pending and not c_out.pending:
            return None
    return "the handshake did not complete"


def check_handshakes(old: Material, new: Material) -> None:
    """Kafka's ``SslFactory.SslEngineValidator`` for the inter-broker listener: a
    server with the old stores takes a client with the new ones, and the other way."""
    for server, client in ((old, new), (new, old)):
        why = handshake_error(server.context, _validation_client(dict(client.values)))
        if why is not None:
            raise StoreError("javax.net.ssl.SSLHandshakeException", why)


def _flag(props: Mapping[str, str], listener: str, name: str) -> bool:
    return (listener_config(props, listener, name) or "false").strip().lower() == "true"


class ListenerTls:
    """One TLS listener: the context its server was given, and the current one."""

    def __init__(self, listener: str, material: Material, *, inter_broker: bool = False
                 ) -> None:
        self.listener = listener
        self.inter_broker = inter_broker
        self.material = material
        self.front = material.context      # what the server holds, for its whole life
        self.front.sni_callback = self._select

    def _select(self, sslobj: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                context: ssl.SSLContext) -> None:
        current = self.material.context
        if sslobj.context is not current:
            sslobj.context = current

    def rebuild(self, props: Mapping[str, str], static: Mapping[str, str]) -> Material:
        """New material from ``props``, checked against the current one (``StoreError``)."""
        new = build(props, self.listener)
        old = self.material
        if not old.has_truststore and new.has_truststore:
            raise StoreError(_CONFIG_EXCEPTION, "Cannot add SSL truststore to an existing "
                                                "listener for which no truststore was "
                                                "configured.")
        check_compatible(old.identity, new.identity,
                         allow_dn=_flag(static, self.listener, "ssl.allow.dn.changes"),
                         allow_san=_flag(static, self.listener, "ssl.allow.san.changes"))
        if self.inter_broker:
            try:
                check_handshakes(old, new)
            except (OSError, ValueError, ssl.SSLError) as exc:
                raise StoreError("javax.net.ssl.SSLHandshakeException", str(exc)) from None
        return new


@dataclass(frozen=True)
class Staged:
    """A checked change of one broker's TLS listeners, to apply once it is stored."""

    props: dict[str, str]
    changes: tuple[tuple[ListenerTls, Material | None], ...]  # None: same values


class BrokerTls:
    """Every TLS listener of one broker."""

    def __init__(self, node_id: int, static: Mapping[str, str], listeners: Sequence[ListenerSpec],
                 store: Callable[[], Mapping[str, Mapping[str, str]]],
                 on_change: Callable[[], None] = lambda: None,
                 inter_broker: str | None = None) -> None:
        self.node_id = node_id
        self.inter_broker = inter_broker
        self.static = dict(static)
        self.specs = [s for s in listeners if s.tls]
        self.store = store
        self.on_change = on_change
        self.listeners: dict[str, ListenerTls] = {}
        self._props: dict[str, str] | None = None

    def props(self) -> dict[str, str]:
        """The configs the listeners were built from (static and dynamic)."""
        if self._props is None:
            self._props = effective_props(self.static, self.store(), self.node_id)
        return self._props

    def context(self, spec: ListenerSpec) -> ssl.SSLContext:
        """The context for ``spec``'s server (built once; it follows later changes)."""
        found = self.listeners.get(spec.name)
        if found is None:
            try:
                material = self._first_build(spec.name, self.props())
            except ConfigError:
                if self.props() == self.static:
                    raise
                log.error("listener %s: its dynamic SSL configs do not load; using its static "
                          "ones", spec.name)
                self._props = dict(self.static)
                material = self._first_build(spec.name, self.static)
            found = self.listeners[spec.name] = ListenerTls(
                spec.name, material, inter_broker=spec.name == self.inter_broker)
        return found.front

    def _first_build(self, listener: str, props: Mapping[str, str]) -> Material:
        """At start: kaflite's checks and messages (``listener_ssl_context``)."""
        def get(name: str) -> str | None:
            return listener_config(props, listener, name)

        context = listener_ssl_context(props, listener)
        try:
            with _store_files(get) as (chain, _, trust), open(chain, "rb") as f:
                cert = x509.load_pem_x509_certificates(f.read())[0]
        except (OSError, ValueError):
            raise ConfigError("ssl.keystore.location", f"listener {listener}: no certificate "
                                                       "in its keystore") from None
        return Material(_values(props, listener),
                        (_mtime(get("ssl.keystore.location")),
                         _mtime(get("ssl.truststore.location"))),
                        context, Identity.of(cert), trust is not None)

    def stage(self, name: str, new: Mapping[str, str]) -> Staged | None:
        """Check the change of BROKER resource ``name`` to ``new`` for this broker's
        listeners; raises Kafka's INVALID_REQUEST. None: nothing here to change."""
        if name != str(self.node_id):
            return None
        props = effective_props(self.static, {**self.store(), name: new}, self.node_id)
        changes: list[tuple[ListenerTls, Material | None]] = []
        for spec in self.specs:
            current = self.listeners.get(spec.name)
            if current is None:
                continue
            if _values(props, spec.name) == current.material.values:
                changes.append((current, None))
                continue
            try:
                changes.append((current, current.rebuild(props, self.static)))
            except StoreError as exc:
                raise exc.refusal() from None
        return Staged(props, tuple(changes))

    def apply(self, staged: Staged | None) -> None:
        """Put a stored change into effect for new connections; with the same values,
        re-read a store file that changed (a failure is logged, the old context kept)."""
        if staged is None:
            return
        changed = False
        for listener, material in staged.changes:
            if material is None:
                if not listener.material.files_changed():
                    continue
                try:
                    material = listener.rebuild(staged.props, self.static)
                except StoreError as exc:
                    log.error("listener %s: its SSL stores changed on disk but cannot be "
                              "used (%s); it keeps the ones it has", listener.listener,
                              exc.message)
                    continue
            listener.material = material
            changed = True
            log.info("listener %s: new connections use the updated SSL keystore and "
                     "truststore", listener.listener)
        self._props = staged.props
        if changed:
            self.on_change()
