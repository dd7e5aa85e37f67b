"""A client's security settings, turned into what each connection needs.

``Security`` reads ``security.protocol`` and the ``sasl.*`` / ``ssl.*`` properties
once per client: the TLS context (``kaflite.security.tls.client_context``, built
at construction so that a missing or bad certificate file is a ``ConfigError``
there, not a retried connection failure later), a factory of SASL mechanisms
(``kaflite.security.sasl.client_mechanism``, one per exchange: SCRAM nonces must
never repeat, and an OAUTHBEARER token is fetched afresh for each
re-authentication), and the principal the broker will see when it is known in
advance (``User:<sasl.username>`` for PLAIN and SCRAM, the certificate's subject
for mTLS).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from kaflite.config import ClientConfig, ConfigError
from kaflite.net.connection import SaslFactory
from kaflite.protocol.connection import SaslMechanism

__all__ = ["Security"]

_SASL_PROPS = ("sasl.username", "sasl.password", "sasl.scram.tokenauth", "oauth_cb",
               "sasl.oauthbearer.method",
               "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
               "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
               "sasl.oauthbearer.config")
_SSL_PROPS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
              "ssl.key.password", "ssl.endpoint.identification.algorithm",
              "enable.ssl.certificate.verification")


class Security:
    """What ``security.protocol`` and its properties ask of every connection."""

    def __init__(self, config: ClientConfig) -> None:
        self.protocol = config.string("security.protocol")
        self.uses_tls = self.protocol in ("SSL", "SASL_SSL")
        self.uses_sasl = self.protocol.startswith("SASL_")
        self.mechanism = config.string("sasl.mechanism") if self.uses_sasl else None
        self._sasl_props = {k: config[k] for k in _SASL_PROPS if config.get(k) is not None}
        self.ssl_context: ssl.SSLContext | None = None
        if self.uses_tls:
            self.ssl_context = _tls_context(config)
        self.principal = self._principal(config)

    def sasl_factory(self) -> SaslFactory | None:
        if self.mechanism is None:
            return None
        return self._new_mechanism

    def _new_mechanism(self) -> SaslMechanism:
        from kaflite.security.sasl import client_mechanism

        assert self.mechanism is not None
        return client_mechanism(self.mechanism, self._sasl_props)

    def _principal(self, config: ClientConfig) -> str | None:
        if self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512") \
                and config.get("sasl.scram.tokenauth"):
            return None   # a delegation token's owner, as the broker reads it
        if self.mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            return f"User:{config['sasl.username']}"
        if self.mechanism is None and self.uses_tls:
            cert = config.optional_string("ssl.certificate.location")
            return _subject(Path(cert)) if cert else "User:ANONYMOUS"
        return None   # OAUTHBEARER: the token's subject, as the broker reads it

    def describe(self) -> str:
        return self.protocol + (f"/{self.mechanism}" if self.mechanism else "")


def _tls_context(config: ClientConfig) -> ssl.SSLContext:
    from kaflite.security.tls import client_context

    props = {k: config[k] for k in _SSL_PROPS if config.get(k) is not None}
    try:
        return client_context(props)
    except (OSError, ValueError) as exc:   # ssl.SSLError is an OSError
        named = next((k for k in ("ssl.key.location", "ssl.certificate.location",
                                  "ssl.ca.location")
                      if props.get(k) and str(props[k]) in str(exc)), None)
        if named is None:
            named = "ssl.key.password" if "password" in str(exc).lower() else \
                "ssl.certificate.location" if props.get("ssl.certificate.location") else \
                "ssl.ca.location"
        raise ConfigError(named, f"cannot set up TLS: {exc}") from exc


def _subject(cert: Path) -> str | None:
    """``User:`` and the certificate's subject in RFC 2253 order, as Kafka's default
    principal builder prints an mTLS client (None if it cannot be read)."""
    try:
        from cryptography import x509

        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    except (ImportError, OSError, ValueError):
        return None
    return "User:" + loaded.subject.rfc4514_string()
