"""Spark's (Java client's) security options, turned into kaflite's (librdkafka's) names.

Spark's ``kafka`` format passes every ``kafka.*`` option to the Java client, so a
Spark job is configured with Java's names::

    kafka.security.protocol    SASL_SSL
    kafka.sasl.mechanism       SCRAM-SHA-512
    kafka.sasl.jaas.config     org.apache.kafka.common.security.scram.ScramLoginModule
                               required username="alice" password="secret";
    kafka.ssl.truststore.location   /path/ca.pem   (ssl.truststore.type PEM)

kaflite's client takes librdkafka's names, so the JAAS config becomes
``sasl.username``/``sasl.password`` (PlainLoginModule, ScramLoginModule), or the
OAUTHBEARER settings (OAuthBearerLoginModule: ``clientId``/``clientSecret``/``scope``
for OIDC with ``sasl.oauthbearer.token.endpoint.url``, ``unsecuredLoginStringClaim_sub``
for an unsecured development token); a PEM trust store becomes ``ssl.ca.location``
and a PEM key store (key and certificate chain in one file) the certificate and
key locations. librdkafka's names given directly pass through unchanged. A JKS or
PKCS12 store cannot be read by Python's ``ssl``: that is an option error, raised
when the query is defined, as Spark raises its own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping

__all__ = ["java_security_options", "parse_jaas"]

log = logging.getLogger("kaflite.spark")

_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
}
# Java-only settings that have nothing to map to: dropped without a warning
_IGNORED = ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password",
            "ssl.keystore.password", "ssl.protocol", "ssl.enabled.protocols",
            "sasl.login.callback.handler.class", "sasl.client.callback.handler.class",
            "sasl.login.class", "sasl.kerberos.service.name")
_ENTRY = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def parse_jaas(text: str, error: Callable[[str], Exception]) -> tuple[str, dict[str, str]]:
    """``LoginModule flag key="value" ...;`` as (module class, options)."""
    body = text.strip().rstrip(";").strip()
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in ("required", "requisite", "sufficient", "optional"):
        raise error("sasl.jaas.config must be '<LoginModule> required key=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = parts[2] if len(parts) > 2 else ""
    pos = 0
    while rest[pos:].strip():
        m = _ENTRY.match(rest, pos)
        if m is None:
            raise error(f"sasl.jaas.config: cannot read the options at {rest[pos:pos + 20]!r}")
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[m.group(1)] = value
        pos = m.end()
    return parts[0], options


def java_security_options(params: Mapping[str, str],
                          error: Callable[[str], Exception]) -> dict[str, str]:
    """``params`` (``kafka.*`` options without the prefix) with Java's security
    settings replaced by the librdkafka names kaflite's client takes."""
    out = {k: v for k, v in params.items() if k not in _IGNORED}
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        module, options = parse_jaas(jaas, error)
        kind = _MODULES.get(module)
        if kind is None:
            raise error(f"sasl.jaas.config: kaflite does not support login module {module} "
                        f"(supported: {', '.join(sorted(_MODULES))})")
        if kind in ("PLAIN", "SCRAM"):
            for key in ("username", "password"):
                if key not in options:
                    raise error(f"sasl.jaas.config: {module} needs {key}")
                out.setdefault(f"sasl.{key}", options[key])
        else:
            _oauthbearer(options, out)
    for store in ("truststore", "keystore"):
        kind = params.get(f"ssl.{store}.type", "PEM").upper()
        location = out.pop(f"ssl.{store}.location", None)
        if location is None:
            continue
        if kind != "PEM":
            raise error(f"ssl.{store}.type {kind} cannot be read by kaflite: convert "
                        f"ssl.{store}.location to PEM (ssl.{store}.type=PEM)")
        if store == "truststore":
            out.setdefault("ssl.ca.location", location)
        else:   # Java's PEM key store holds the private key and the certificate chain
            out.setdefault("ssl.certificate.location", location)
            out.setdefault("ssl.key.location", location)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"    # Java's way to turn it off
    return out


def _oauthbearer(options: Mapping[str, str], out: dict[str, str]) -> None:
    if "clientId" in options:
        out.setdefault("sasl.oauthbearer.method", "oidc")
        out.setdefault("sasl.oauthbearer.client.id", options["clientId"])
        if "clientSecret" in options:
            out.setdefault("sasl.oauthbearer.client.secret", options["clientSecret"])
        if "scope" in options:
            out.setdefault("sasl.oauthbearer.scope", options["scope"])
    elif "unsecuredLoginStringClaim_sub" in options:
        out.setdefault("sasl.oauthbearer.config",
                       f"principal={options['unsecuredLoginStringClaim_sub']}")
    else:
        log.warning("sasl.jaas.config: OAuthBearerLoginModule without clientId or "
                    "unsecuredLoginStringClaim_sub; kaflite has no token to send")
