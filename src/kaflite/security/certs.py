"""A test PKI in one call: a CA, a broker certificate and client certificates, as PEM.

``write_test_pki(directory)`` writes::

    ca.pem, ca-key.pem                   the CA (kept, and reused by a later call)
    broker.pem, broker-key.pem           CN=<first host>, SANs for every host (DNS or IP)
    client-<name>.pem, client-<name>-key.pem   CN=<name> (its mTLS principal: User:CN=<name>)

Keys are ECDSA P-256, unencrypted unless ``key_password`` is given (then PKCS#8 with the
best available encryption; the CA's key stays unencrypted). The broker certificate serves
both TLS ends (serverAuth and clientAuth), so brokers can use it to talk to each other.
These are for tests and demos: the CA key sits next to the certificates.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "write_test_pki"]


@dataclass(frozen=True)
class Pki:
    ca: Path
    broker_cert: Path
    broker_key: Path
    clients: dict[str, tuple[Path, Path]]      # name -> (certificate, key)
    broker_keystore: Path | None = None         # the broker's key and chain in one PEM

    def broker_properties(self) -> dict[str, str]:
        """Kafka's broker settings for TLS listeners with these files (PEM stores)."""
        if self.broker_keystore is None:
            raise ValueError("no broker keystore was written")
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.broker_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}

    def client_properties(self, name: str) -> dict[str, str]:
        """librdkafka's properties for client ``name`` (mTLS) over SSL."""
        cert, key = self.clients[name]
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca),
                "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def _load_or_create_ca(directory: Path, days: int
                       ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / "ca.pem", directory / "ca-key.pem"
    if cert_path.exists() and key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return x509.load_pem_x509_certificate(cert_path.read_bytes()), key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kaflite test CA"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kaflite")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _key_pem(key, None), private=True)
    return cert, key


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _leaf(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common_name: str,
          hosts: Sequence[str], usages: list[x509.ObjectIdentifier], days: int
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(
                   digital_signature=True, key_cert_sign=False, crl_sign=False,
                   content_commitment=False, key_encipherment=False, data_encipherment=False,
                   key_agreement=True, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def write_test_pki(directory: Path, hosts: Sequence[str] = ("localhost", "127.0.0.1"),
                   clients: Sequence[str] = ("client",), days: int = 365, *,
                   key_password: str | None = None) -> Pki:
    """Write a CA, a broker certificate for ``hosts`` and one certificate per client
    into ``directory`` (created if missing); an existing CA there is reused."""
    if not hosts:
        raise ValueError("the broker certificate needs at least one host")
    if days < 1:
        raise ValueError("days must be at least 1")
    for name in clients:
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"not a usable client name: {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _load_or_create_ca(directory, days)
    pem = serialization.Encoding.PEM
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert, key = _leaf(ca, ca_key, hosts[0], hosts, both, days)
    broker_cert = _write(directory / "broker.pem", cert.public_bytes(pem))
    broker_key = _write(directory / "broker-key.pem", _key_pem(key, key_password), True)
    keystore = _write(directory / "broker-keystore.pem",
                      _key_pem(key, key_password) + cert.public_bytes(pem), True)
    written: dict[str, tuple[Path, Path]] = {}
    for name in clients:
        cert, key = _leaf(ca, ca_key, name, (), [ExtendedKeyUsageOID.CLIENT_AUTH], days)
        written[name] = (_write(directory / f"client-{name}.pem", cert.public_bytes(pem)),
                         _write(directory / f"client-{name}-key.pem",
                                _key_pem(key, key_password), True))
    return Pki(directory / "ca.pem", broker_cert, broker_key, written, keystore)
