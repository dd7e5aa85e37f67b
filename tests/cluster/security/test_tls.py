"""TLS listeners: SASL over TLS, mTLS principals, and bad TLS input closing only
its own connection."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kaflite.cluster import Cluster
from kaflite.security.certs import Pki
from kaflite.security.tls import client_context
from tests.cluster.security._wire import Wire
from tests.cluster.security.test_sasl import bystander, port, run


def tls(pki: Pki, client: str | None = None, other: Pki | None = None) -> ssl.SSLContext:
    props: dict[str, object] = {"ssl.ca.location": str(pki.ca)}
    if client is not None:
        cert, key = (other or pki).clients[client]
        props |= {"ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    return client_context(props)


def test_sasl_ssl_and_mtls_principals(secure_cluster: Cluster, pki: Pki) -> None:
    async def main() -> None:
        w = await Wire.open(port(secure_cluster, "SASL_SSL"), tls(pki))
        assert (await w.authenticate("SCRAM-SHA-512", "alice", "alice-secret")).error_code == 0
        assert [b.port for b in (await w.metadata()).brokers] == [
            port(secure_cluster, "SASL_SSL")]
        m = await Wire.open(port(secure_cluster, "SSL"), tls(pki, "client"))
        await m.metadata()
        rows = {c.listener: c for c in secure_cluster.connections()
                if c.listener in ("SSL", "SASL_SSL")}
        assert (rows["SASL_SSL"].principal, rows["SASL_SSL"].sasl_mechanism) == (
            "User:alice", "SCRAM-SHA-512")
        assert rows["SSL"].principal.startswith("User:CN=client")
        assert rows["SSL"].security_protocol == "SSL"
        w.close()
        m.close()

    run(main())


def test_bad_tls_input_closes_only_that_connection(secure_cluster: Cluster, pki: Pki,
                                                   untrusted_pki: Pki) -> None:
    async def main() -> None:
        async with bystander(secure_cluster) as still_producing:
            # plaintext Kafka bytes on a TLS port
            w = await Wire.open(port(secure_cluster, "SASL_SSL"))
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await w.api_versions()
            await still_producing()
            # a client certificate from a CA the broker does not trust (mTLS required)
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                m = await Wire.open(port(secure_cluster, "SSL"),
                                    tls(pki, "mallory", other=untrusted_pki))
                await m.metadata()
            # no client certificate at all where one is required
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                m = await Wire.open(port(secure_cluster, "SSL"), tls(pki))
                await m.metadata()
            # a client that does not trust the broker's CA gives up by itself
            with pytest.raises(ssl.SSLError):
                await Wire.open(port(secure_cluster, "SASL_SSL"), tls(untrusted_pki))
            await still_producing()
            # and the TLS listeners still serve good clients
            ok = await Wire.open(port(secure_cluster, "SSL"), tls(pki, "client"))
            await ok.metadata()
            ok.close()

    run(main())
