"""Rotating a TLS listener's certificate with a dynamic broker config (KIP-226), as
Apache Kafka 4.4 does it: ``listener.name.<listener>.ssl.keystore.location`` set on a
broker, checked as Kafka's SslFactory checks it, used by new connections only.

The refusals' texts are Kafka 4.4.0's (``SslFactory``, ``SslFactory$CertificateEntries``,
``DefaultSslEngineFactory$FileBasedPemStore`` and ``kafka.server.DynamicBrokerConfig``
in its jars), put together as its broker answers IncrementalAlterConfigs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from kaflite.cluster import Cluster
from kaflite.protocol.messages import IncrementalAlterConfigsRequest
from kaflite.protocol.messages import incremental_alter_configs_request as iacq
from kaflite.security.certs import Pki, write_test_pki
from kaflite.security.tls import client_context
from tests.cluster.security._wire import TIMEOUT, Wire

LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
LOCATION = "listener.name.ssl.ssl.keystore.location"
INVALID_REQUEST = 42
WRAP = ("Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic "
        "config update of SSLFactory failed: {} for configuration Invalid dynamic configuration")


def reissued(pki: Pki, directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
             key_password: str | None = None) -> Pki:
    """A new broker certificate from ``pki``'s CA (new key, new serial)."""
    directory.mkdir(parents=True)
    shutil.copy(pki.ca, directory / "ca.pem")
    shutil.copy(pki.ca.parent / "ca-key.pem", directory / "ca-key.pem")
    return write_test_pki(directory, hosts, clients=(), key_password=key_password)


def serial(pki: Pki) -> int:
    return x509.load_pem_x509_certificate(pki.broker_cert.read_bytes()).serial_number


def ports(cluster: Cluster) -> tuple[int, int]:
    return (int(cluster.bootstrap("PLAINTEXT").rpartition(":")[2]),
            int(cluster.bootstrap("SSL").rpartition(":")[2]))


async def served_serial(cluster: Cluster, pki: Pki) -> int:
    """The serial number of the certificate a new TLS connection is shown."""
    _, writer = await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", ports(cluster)[1], ssl=client_context({"ssl.ca.location": str(pki.ca)}),
        server_hostname="localhost"), TIMEOUT)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()


async def alter(cluster: Cluster, configs: dict[str, str | None], *, resource: str = "0",
                validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of BROKER ``resource``: (error code, message)."""
    w = await Wire.open(ports(cluster)[0])
    try:
        resp = await w.request(IncrementalAlterConfigsRequest(
            resources=[iacq.AlterConfigsResource(
                resource_type=4, resource_name=resource,
                configs=[iacq.AlterableConfig(name=k, config_operation=0 if v is not None
                                              else 1, value=v)
                         for k, v in configs.items()])],
            validate_only=validate_only), 1)
    finally:
        w.close()
    return resp.responses[0].error_code, resp.responses[0].error_message or None


@pytest.fixture
def cluster(pki: Pki, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(brokers=1, listeners=LISTENERS, config=pki.broker_properties(),
                 data_dir=tmp_path / "data") as c:
        yield c


def test_new_certificate_for_new_connections_old_ones_keep_working(
        cluster: Cluster, pki: Pki, tmp_path: Path) -> None:
    new = reissued(pki, tmp_path / "new")

    async def main() -> None:
        assert await served_serial(cluster, pki) == serial(pki)
        before = await Wire.open(ports(cluster)[1], client_context(
            {"ssl.ca.location": str(pki.ca)}))
        assert (await before.metadata()).brokers
        # validate_only: checked, accepted, and nothing changes
        assert await alter(cluster, {LOCATION: str(new.broker_keystore)},
                           validate_only=True) == (0, None)
        assert await served_serial(cluster, pki) == serial(pki)
        assert cluster.controller.broker_configs.get("0", {}).get(LOCATION) is None
        assert await alter(cluster, {LOCATION: str(new.broker_keystore)}) == (0, None)
        assert await served_serial(cluster, pki) == serial(new)
        assert (await before.metadata()).brokers        # the old connection goes on
        before.close()

    asyncio.run(main())
    # stored in the metadata: a restarted broker serves the new certificate
    cluster.call(cluster.restart_broker(0))
    assert asyncio.run(served_serial(cluster, pki)) == serial(new)


def test_refused_keystores_change_nothing(cluster: Cluster, pki: Pki, tmp_path: Path) -> None:
    other_dn = reissued(pki, tmp_path / "dn", hosts=("broker.example", "127.0.0.1"))
    fewer_sans = reissued(pki, tmp_path / "san", hosts=("localhost",))
    locked = reissued(pki, tmp_path / "locked", key_password="right")
    missing = tmp_path / "nowhere.pem"

    async def refused(configs: dict[str, str | None]) -> str | None:
        code, message = await alter(cluster, configs)
        assert code == INVALID_REQUEST, message
        assert await served_serial(cluster, pki) == serial(pki)
        assert LOCATION not in cluster.controller.broker_configs.get("0", {})
        return message

    async def main() -> None:
        assert await refused({LOCATION: str(other_dn.broker_keystore)}) == WRAP.format(
            "org.apache.kafka.common.config.ConfigException: Keystore DistinguishedName does "
            "not match:  existing={alias=kafka, DN=CN=localhost}, "
            "new={alias=kafka, DN=CN=broker.example}")
        assert await refused({LOCATION: str(fewer_sans.broker_keystore)}) == WRAP.format(
            "org.apache.kafka.common.config.ConfigException: Keystore SubjectAltNames do not "
            "match:  existing={alias=kafka, SAN=[[2, localhost], [7, 127.0.0.1]]}, "
            "new={alias=kafka, SAN=[[2, localhost]]}")
        failed = ("org.apache.kafka.common.errors.InvalidConfigurationException: "
                  "Failed to load PEM SSL keystore {}")
        assert await refused({LOCATION: str(locked.broker_keystore),
                              "listener.name.ssl.ssl.key.password": "wrong"}) == WRAP.format(
            failed.format(locked.broker_keystore))
        assert await refused({LOCATION: str(missing)}) == WRAP.format(failed.format(missing))
        assert await refused({LOCATION: str(locked.broker_keystore),
                              "listener.name.ssl.ssl.keystore.password": "right"}) == \
            WRAP.format("org.apache.kafka.common.errors.InvalidConfigurationException: SSL key "
                        "store password cannot be specified with PEM format, only key "
                        "password may be specified")
        # the right password: accepted
        assert await alter(cluster, {LOCATION: str(locked.broker_keystore),
                                     "listener.name.ssl.ssl.key.password": "right"}) == (0, None)
        assert await served_serial(cluster, pki) == serial(locked)
        # per broker only, as Kafka: not at the cluster-wide default
        assert await alter(cluster, {LOCATION: str(pki.broker_keystore)}, resource="") == (
            INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id "
                             f"must be specified: [{LOCATION}]")
        # a listener that is not TLS, or no listener: stored, as Kafka stores them, no effect
        assert await alter(cluster, {
            "listener.name.plaintext.ssl.keystore.location": str(missing),
            "listener.name.nosuch.ssl.keystore.location": str(missing)}) == (0, None)
        assert await served_serial(cluster, pki) == serial(locked)

    asyncio.run(main())


def test_allow_dn_changes(pki: Pki, tmp_path: Path) -> None:
    # the same SubjectAltNames, another subject
    renamed = reissued(pki, tmp_path / "renamed", hosts=("127.0.0.1", "localhost"))
    fewer_sans = reissued(pki, tmp_path / "san", hosts=("127.0.0.1",))
    config = {**pki.broker_properties(), "ssl.allow.dn.changes": "true"}
    with Cluster(brokers=1, listeners=LISTENERS, config=config,
                 data_dir=tmp_path / "data") as cluster:
        async def main() -> None:
            assert await alter(cluster, {LOCATION: str(renamed.broker_keystore)}) == (0, None)
            assert await served_serial(cluster, pki) == serial(renamed)
            code, message = await alter(cluster, {LOCATION: str(fewer_sans.broker_keystore)})
            assert code == INVALID_REQUEST and "Keystore SubjectAltNames do not match" in (
                message or "")
            assert await served_serial(cluster, pki) == serial(renamed)

        asyncio.run(main())


def test_same_location_again_rereads_a_changed_file(cluster: Cluster, pki: Pki,
                                                    tmp_path: Path) -> None:
    second, third = (reissued(pki, tmp_path / n) for n in ("second", "third"))
    live = tmp_path / "live-keystore.pem"
    shutil.copy(second.broker_keystore, live)

    async def main() -> None:
        assert await alter(cluster, {LOCATION: str(live)}) == (0, None)
        assert await served_serial(cluster, pki) == serial(second)
        # the file changes on disk: nothing happens until the config is set again
        before = os.stat(live).st_mtime_ns
        shutil.copy(third.broker_keystore, live)
        os.utime(live, ns=(before + 10**9, before + 10**9))
        assert await served_serial(cluster, pki) == serial(second)
        assert await alter(cluster, {LOCATION: str(live)}) == (0, None)
        assert await served_serial(cluster, pki) == serial(third)

    asyncio.run(main())


def test_broker_processes(pki: Pki, tmp_path: Path) -> None:
    """With ``--processes``: the broker process that takes the request rotates its own
    listener, and finds the stored value again when it starts anew."""
    new = reissued(pki, tmp_path / "new")
    with Cluster(brokers=1, listeners=LISTENERS, config=pki.broker_properties(),
                 data_dir=tmp_path / "data", processes=True) as cluster:
        async def main() -> None:
            assert await served_serial(cluster, pki) == serial(pki)
            assert await alter(cluster, {LOCATION: str(new.broker_keystore)}) == (0, None)
            assert await served_serial(cluster, pki) == serial(new)

        asyncio.run(main())
        cluster.call(cluster.restart_broker(0))
        assert asyncio.run(served_serial(cluster, pki)) == serial(new)


def test_inter_broker_listener_needs_a_handshake_both_ways(pki: Pki, tmp_path: Path) -> None:
    """On the inter-broker listener Kafka also checks that brokers with the old stores
    and brokers with the new ones can still talk: a certificate from a CA the
    truststore does not hold is refused there, though its subject and names match."""
    same_ca = reissued(pki, tmp_path / "same-ca")
    other_ca = write_test_pki(tmp_path / "other-ca", clients=())
    config = {**pki.broker_properties(), "inter.broker.listener.name": "SSL"}
    with Cluster(brokers=1, listeners=LISTENERS, config=config,
                 data_dir=tmp_path / "data") as cluster:
        async def main() -> None:
            assert await alter(cluster, {LOCATION: str(other_ca.broker_keystore)}) == (
                INVALID_REQUEST, WRAP.format(
                    "javax.net.ssl.SSLHandshakeException: CERTIFICATE_VERIFY_FAILED"))
            assert await served_serial(cluster, pki) == serial(pki)
            assert await alter(cluster, {LOCATION: str(same_ca.broker_keystore)}) == (0, None)
            assert await served_serial(cluster, pki) == serial(same_ca)

        asyncio.run(main())
