"""Spark's Java security options reach kaflite's client under librdkafka's names."""

from __future__ import annotations

import pytest

from kaflite.config import resolve
from kaflite.spark.options import (
    KafkaOptionError,
    client_config,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9093", "subscribe": "t"}
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="alice" password="s3cr\\"et";')


def test_scram_over_ssl_as_spark_users_write_it() -> None:
    opts = parse_source_options({
        **BASE, "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": SCRAM,
        "kafka.ssl.truststore.location": "/pki/ca.pem", "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": ""}, streaming=False)
    config = client_config(opts.kafka_params, "consumer", "spark")
    resolved = resolve("consumer", config)
    assert resolved["security.protocol"] == "SASL_SSL"
    assert resolved["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (resolved["sasl.username"], resolved["sasl.password"]) == ("alice", 's3cr"et')
    assert resolved["ssl.ca.location"] == "/pki/ca.pem"
    assert resolved["ssl.endpoint.identification.algorithm"] == "none"


def test_plain_in_the_sink_and_a_pem_keystore() -> None:
    opts = parse_sink_options({
        "kafka.bootstrap.servers": "h:9093", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username=bob password=pw;',
        "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": "/pki/client.pem"})
    resolved = resolve("producer", client_config(opts.kafka_params, "producer"))
    assert (resolved["sasl.username"], resolved["sasl.password"]) == ("bob", "pw")
    assert resolved["ssl.certificate.location"] == resolved["ssl.key.location"] == \
        "/pki/client.pem"


def test_librdkafka_names_pass_through() -> None:
    opts = parse_source_options({**BASE, "kafka.security.protocol": "SSL",
                                 "kafka.ssl.ca.location": "/ca.pem"}, streaming=True)
    assert opts.kafka_params["ssl.ca.location"] == "/ca.pem"


def test_oauthbearer_login_module() -> None:
    opts = parse_source_options({
        **BASE, "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.'
                                  'OAuthBearerLoginModule required clientId="app" '
                                  'clientSecret="xyz" scope="kafka";'}, streaming=False)
    p = opts.kafka_params
    assert (p["sasl.oauthbearer.method"], p["sasl.oauthbearer.client.id"],
            p["sasl.oauthbearer.client.secret"], p["sasl.oauthbearer.scope"]) == (
        "oidc", "app", "xyz", "kafka")
    unsecured = parse_source_options({
        **BASE, "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.'
        'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";'},
        streaming=False)
    assert unsecured.kafka_params["sasl.oauthbearer.config"] == "principal=alice"


@pytest.mark.parametrize(("extra", "message"), [
    ({"kafka.ssl.truststore.location": "/ts.jks", "kafka.ssl.truststore.type": "JKS"},
     "JKS cannot be read"),
    ({"kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
     "does not support login module"),
    ({"kafka.sasl.jaas.config": SCRAM.replace('password="s3cr\\"et"', "")}, "needs password"),
    ({"kafka.sasl.jaas.config": "garbage"}, "must be"),
])
def test_refused_when_the_query_is_defined(extra: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaOptionError, match=message):
        parse_source_options({**BASE, **extra}, streaming=False)
