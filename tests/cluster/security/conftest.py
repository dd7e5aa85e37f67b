"""A one-broker cluster with every kind of listener, and a test PKI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.security.certs import Pki, write_test_pki

LISTENERS = ("PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
             "SSL://127.0.0.1:0,REAUTH://127.0.0.1:0")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_bob="bob \\"quoted\\" secret";')


def security_config(pki: Pki) -> dict[str, str]:
    return {
        **pki.broker_properties(),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,SSL:SSL,REAUTH:SASL_PLAINTEXT",
        "sasl.users": "alice:alice-secret,carol:carol-secret",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms":
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.reauth.connections.max.reauth.ms": "1500",
    }


@pytest.fixture(scope="package")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"), clients=("client",))


@pytest.fixture(scope="package")
def untrusted_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("other-ca"), clients=("mallory",))


@pytest.fixture(scope="module")
def secure_cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    config = security_config(pki)
    with Cluster(brokers=1, listeners=LISTENERS, config=config) as cluster:
        yield cluster
