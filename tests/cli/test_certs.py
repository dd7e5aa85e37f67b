"""``kaflite certs``: the files, the printed client properties, and that they work."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.security.tls import client_context, principal_from_peer_cert, server_context

runner = CliRunner()


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_certs_prints_paths_and_properties(tmp_path: Path) -> None:
    result = runner.invoke(app, ["certs", str(tmp_path / "pki"), "--host", "broker1",
                                 "--host", "10.0.0.7", "--client", "alice", "--client", "bob"])
    assert result.exit_code == 0, result.output
    pki = tmp_path / "pki"
    for name in ("ca.pem", "ca-key.pem", "broker.pem", "broker-key.pem", "client-alice.pem",
                 "client-alice-key.pem", "client-bob.pem", "client-bob-key.pem"):
        assert (pki / name).is_file(), name
    assert f"ca           {pki / 'ca.pem'}" in result.output
    assert "(SANs: broker1, 10.0.0.7)" in result.output
    assert "mTLS principal User:CN=bob" in result.output
    assert f"ssl.ca.location={pki / 'ca.pem'}" in result.output
    props = read_properties(pki / "client-alice.properties")
    assert props == {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem"),
                     "ssl.certificate.location": str(pki / "client-alice.pem"),
                     "ssl.key.location": str(pki / "client-alice-key.pem")}
    assert "\n".join(f"{k}={v}" for k, v in props.items()) in result.output


def test_printed_properties_make_an_mtls_handshake(tmp_path: Path) -> None:
    result = runner.invoke(app, ["certs", str(tmp_path), "--client", "carol",
                                 "--key-password", "pw", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    carol = doc["clients"]["carol"]
    assert carol["principal"] == "User:CN=carol" and doc["hosts"] == ["localhost", "127.0.0.1"]
    assert carol["properties"]["ssl.key.password"] == "pw"
    server = server_context(doc["broker_cert"], doc["broker_key"], key_password="pw",
                            cafile=doc["ca"], client_auth="required")
    client = client_context(read_properties(tmp_path / "client-carol.properties"))
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    done: set[str] = set()
    for _ in range(20):
        for name, obj in (("c", cli), ("s", srv)):
            try:
                obj.do_handshake()
                done.add(name)
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == {"c", "s"}:
            break
    assert done == {"c", "s"}
    assert principal_from_peer_cert(srv.getpeercert()) == "User:CN=carol"


def test_certs_refuses_a_bad_client_name(tmp_path: Path) -> None:
    result = runner.invoke(app, ["certs", str(tmp_path), "--client", "../evil"])
    assert result.exit_code == 2
    assert "not a usable client name" in result.output
    assert not list(tmp_path.iterdir())
