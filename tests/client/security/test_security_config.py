"""Security properties: librdkafka's names and defaults, and what is refused."""

from __future__ import annotations

import pytest

from kaflite.config import ConfigError, resolve

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_are_librdkafkas() -> None:
    c = resolve("consumer", BOOT)
    assert c["security.protocol"] == "PLAINTEXT"
    assert c["sasl.mechanism"] == "GSSAPI"
    assert c["ssl.endpoint.identification.algorithm"] == "https"
    assert c["sasl.oauthbearer.method"] == "default"
    assert c["sasl.username"] is None and c["ssl.ca.location"] is None


def test_aliases_and_case() -> None:
    c = resolve("producer", {**BOOT, "security.protocol": "sasl_ssl",
                             "sasl.mechanisms": "scram-sha-512",
                             "sasl.username": "alice", "sasl.password": "pw"})
    assert c["security.protocol"] == "SASL_SSL"
    assert c["sasl.mechanism"] == "SCRAM-SHA-512"


@pytest.mark.parametrize(("extra", "named"), [
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),            # GSSAPI default
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "KERBEROS"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.username": "a"}, "sasl.password"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
      "sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.client.id"),
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"ssl.endpoint.identification.algorithm": "http"}, "ssl.endpoint.identification.algorithm"),
    ({"oauth_cb": "not callable"}, "oauth_cb"),
])
def test_refused(extra: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve("consumer", {**BOOT, **extra})
    assert info.value.property == named


def test_gssapi_is_fine_without_sasl() -> None:
    assert resolve("admin", {**BOOT, "security.protocol": "SSL"})["sasl.mechanism"] == "GSSAPI"


def test_oauth_cb_as_keyword() -> None:
    def cb(config: str) -> tuple[str, float]:
        return "token", 0.0

    c = resolve("admin", BOOT, security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                oauth_cb=cb)
    assert c["oauth_cb"] is cb


def test_secrets_never_in_repr() -> None:
    c = resolve("producer", {**BOOT, "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                             "sasl.password": "pw-5ecret", "ssl.key.password": "key-5ecret",
                             "sasl.oauthbearer.client.secret": "oidc-5ecret"})
    text = repr(c) + str(c)
    assert "alice" in text
    for secret in ("pw-5ecret", "key-5ecret", "oidc-5ecret"):
        assert secret not in text
