"""TLS contexts for brokers and clients, and the principal of an mTLS peer.

``server_context`` takes Kafka's ``ssl.client.auth`` (none, requested, required);
``client_context`` takes librdkafka's property names (``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``,
``ssl.endpoint.identification.algorithm`` = ``https`` by default, or ``none``, and
``enable.ssl.certificate.verification``). Both require TLS 1.2 or later.

``principal_from_peer_cert`` turns ``SSLSocket.getpeercert()`` into the principal that
Kafka's default principal builder gives: ``User:`` and the subject in RFC 2253 form
(most specific RDN first, ``CN=client,OU=eng,O=acme,C=US``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

__all__ = ["ANONYMOUS", "CLIENT_AUTH", "client_context", "principal_from_peer_cert",
           "server_context"]

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


def server_context(certfile: str, keyfile: str, *, key_password: str | None = None,
                   cafile: str | None = None, client_auth: str = "none") -> ssl.SSLContext:
    """A broker's context: its certificate chain and key, and (for ``ssl.client.auth``
    requested or required) the CAs its clients' certificates must chain to."""
    try:
        verify = CLIENT_AUTH[client_auth.lower()]
    except KeyError:
        raise ValueError(f"Invalid value {client_auth} for configuration ssl.client.auth: "
                         f"String must be one of: {', '.join(CLIENT_AUTH)}") from None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile, password=key_password)
    if verify != ssl.CERT_NONE:
        if cafile:
            ctx.load_verify_locations(cafile=cafile)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = verify
    return ctx


def _flag(value: object, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def client_context(props: Mapping[str, object]) -> ssl.SSLContext:
    """A client's context from librdkafka's ``ssl.*`` properties."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    algorithm = str(props.get("ssl.endpoint.identification.algorithm") or "https").lower()
    if algorithm not in ("https", "none"):
        raise ValueError(f"Invalid value {algorithm} for configuration "
                         "ssl.endpoint.identification.algorithm: expected https or none")
    verify = _flag(props.get("enable.ssl.certificate.verification"), True)
    ctx.check_hostname = verify and algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    ca = props.get("ssl.ca.location")
    if ca:
        if os.path.isdir(str(ca)):
            ctx.load_verify_locations(capath=str(ca))
        else:
            ctx.load_verify_locations(cafile=str(ca))
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    cert, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if cert:
        password = props.get("ssl.key.password")
        ctx.load_cert_chain(str(cert), str(key) if key else None,
                            password=str(password) if password is not None else None)
    elif key:
        raise ValueError("ssl.key.location is set without ssl.certificate.location")
    return ctx


# RFC 2253's keywords (what Java's X500Principal.getName() prints) for OpenSSL's long names
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_EMAIL_OID = "1.2.840.113549.1.9.1"


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or \
                (ch == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    if name == "emailAddress":      # Java prints it as the OID and the DER IA5String in hex
        raw = value.encode("ascii", "replace")
        if len(raw) < 128:
            return f"{_EMAIL_OID}=#16{len(raw):02x}{raw.hex()}"
    return f"{name}={_escape(value)}"


def principal_from_peer_cert(cert: Mapping[str, object] | None) -> str:
    """``User:<subject in RFC 2253 form>``, or ``User:ANONYMOUS`` without a certificate
    (an empty dict is what ``getpeercert()`` returns for an unverified one)."""
    subject = cert.get("subject") if cert else None
    if not isinstance(subject, tuple | list) or not subject:
        return ANONYMOUS
    rdns = []
    for rdn in reversed(subject):       # DER order is least specific first; RFC 2253 reverses
        parts = [_attribute(str(pair[0]), str(pair[1])) for pair in rdn
                 if isinstance(pair, tuple | list) and len(pair) == 2]
        if parts:
            rdns.append("+".join(parts))
    return "User:" + ",".join(rdns) if rdns else ANONYMOUS
