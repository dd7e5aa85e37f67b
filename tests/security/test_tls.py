"""TLS contexts: in-process handshakes (memory BIOs, no sockets) with ``write_test_pki``'s
certificates, and the mTLS principal as Kafka's default principal builder prints it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kaflite.security.certs import Pki, write_test_pki
from kaflite.security.tls import client_context, principal_from_peer_cert, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"), clients=("alice",))


def handshake(server: ssl.SSLContext, client: ssl.SSLContext,
              hostname: str = "localhost") -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake between two contexts through memory BIOs (bounded)."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, obj in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            cli.write(b"ping")      # TLS 1.3: the server checks the client's cert late
            s_in.write(c_out.read())
            assert srv.read(4) == b"ping"
            return srv, cli
    raise AssertionError("handshake did not finish")


def test_server_auth(pki: Pki) -> None:
    srv, cli = handshake(server_context(str(pki.broker_cert), str(pki.broker_key)),
                         client_context({"ssl.ca.location": str(pki.ca)}))
    assert cli.version() in ("TLSv1.2", "TLSv1.3")
    assert principal_from_peer_cert(srv.getpeercert()) == "User:ANONYMOUS"


def test_ip_address_san(pki: Pki) -> None:
    handshake(server_context(str(pki.broker_cert), str(pki.broker_key)),
              client_context({"ssl.ca.location": str(pki.ca)}), hostname="127.0.0.1")


@pytest.mark.parametrize("client_auth", ["required", "requested"])
def test_mtls_principal(pki: Pki, client_auth: str) -> None:
    server = server_context(str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca),
                            client_auth=client_auth)
    cert, key = pki.clients["alice"]
    srv, _ = handshake(server, client_context(pki.client_properties("alice")))
    assert principal_from_peer_cert(srv.getpeercert()) == "User:CN=alice"
    assert str(cert).endswith("client-alice.pem") and str(key).endswith("client-alice-key.pem")


def test_requested_without_a_certificate_is_anonymous(pki: Pki) -> None:
    server = server_context(str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca),
                            client_auth="requested")
    srv, _ = handshake(server, client_context({"ssl.ca.location": str(pki.ca)}))
    assert principal_from_peer_cert(srv.getpeercert()) == "User:ANONYMOUS"


def test_required_without_a_certificate_fails(pki: Pki) -> None:
    server = server_context(str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca),
                            client_auth="required")
    with pytest.raises(ssl.SSLError):
        handshake(server, client_context({"ssl.ca.location": str(pki.ca)}))


def test_untrusted_certificates_fail(pki: Pki, tmp_path: Path) -> None:
    other = write_test_pki(tmp_path / "other", clients=("alice",))
    server = server_context(str(pki.broker_cert), str(pki.broker_key))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client_context({"ssl.ca.location": str(other.ca)}))
    mtls = server_context(str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca),
                          client_auth="required")
    client = client_context({**other.client_properties("alice"), "ssl.ca.location": str(pki.ca)})
    with pytest.raises(ssl.SSLError):
        handshake(mtls, client)


def test_endpoint_identification(pki: Pki) -> None:
    server = server_context(str(pki.broker_cert), str(pki.broker_key))
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        handshake(server, client_context({"ssl.ca.location": str(pki.ca)}), "broker.example")
    handshake(server, client_context({"ssl.ca.location": str(pki.ca),
                                      "ssl.endpoint.identification.algorithm": "none"}),
              "broker.example")
    with pytest.raises(ValueError, match=r"ssl\.endpoint\.identification\.algorithm"):
        client_context({"ssl.endpoint.identification.algorithm": "ldap"})


def test_encrypted_keys(tmp_path: Path) -> None:
    pki = write_test_pki(tmp_path, clients=("bob",), key_password="hunter2")
    assert b"ENCRYPTED" in pki.broker_key.read_bytes()
    with pytest.raises(ssl.SSLError):
        server_context(str(pki.broker_cert), str(pki.broker_key), key_password="wrong")
    server = server_context(str(pki.broker_cert), str(pki.broker_key), key_password="hunter2",
                            cafile=str(pki.ca), client_auth="required")
    client = client_context({**pki.client_properties("bob"), "ssl.key.password": "hunter2"})
    srv, _ = handshake(server, client)
    assert principal_from_peer_cert(srv.getpeercert()) == "User:CN=bob"


def test_invalid_client_auth(pki: Pki) -> None:
    with pytest.raises(ValueError, match=r"ssl\.client\.auth"):
        server_context(str(pki.broker_cert), str(pki.broker_key), client_auth="always")


def test_principal_is_rfc2253() -> None:
    cert: dict[str, object] = {"subject": (
        (("countryName", "US"),), (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "42")),
        (("commonName", "#client "),), (("emailAddress", "a@b.c"),))}
    assert principal_from_peer_cert(cert) == (
        "User:1.2.840.113549.1.9.1=#16056140622e63,CN=\\#client\\ ,OU=eng+UID=42,"
        "O=Acme\\, Inc.,C=US")
    assert principal_from_peer_cert(None) == "User:ANONYMOUS"
    assert principal_from_peer_cert({}) == "User:ANONYMOUS"


def test_write_test_pki_reuses_its_ca(pki: Pki, tmp_path: Path) -> None:
    first = write_test_pki(tmp_path, clients=())
    again = write_test_pki(tmp_path, hosts=("broker1",), clients=("carol",))
    assert first.ca.read_bytes() == again.ca.read_bytes()
    assert again.clients["carol"][0].exists()
    assert oct(again.clients["carol"][1].stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError):
        write_test_pki(tmp_path, hosts=())
