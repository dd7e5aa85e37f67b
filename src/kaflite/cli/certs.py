"""``kaflite certs DIRECTORY``: a test CA, a broker certificate and client certificates, in one line.

It prints where each file went and the properties a client needs (librdkafka's names),
and writes them to ``DIRECTORY/client-<name>.properties`` for ``--command-config``. A CA
already in DIRECTORY is reused, so clients can be added later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kaflite.cli._output import JsonOption, emit_json, emit_lines
from kaflite.security.certs import write_test_pki


def certs(
    directory: Annotated[Path, typer.Argument(
        help="where to write the PEM files (created if missing)")],
    hosts: Annotated[list[str] | None, typer.Option(
        "--host", metavar="HOST",
        help="a name or IP the broker certificate is for (repeatable; "
             "default: localhost and 127.0.0.1)")] = None,
    clients: Annotated[list[str] | None, typer.Option(
        "--client", metavar="NAME",
        help="a client certificate with CN=NAME (repeatable; default: client)")] = None,
    days: Annotated[int, typer.Option("--days", metavar="N", min=1,
                                      help="how long the certificates are valid")] = 365,
    key_password: Annotated[str | None, typer.Option(
        "--key-password", metavar="PASSWORD",
        help="encrypt the broker and client keys with this password")] = None,
    as_json: JsonOption = False,
) -> None:
    """Write a test CA with broker and client certificates (PEM) for TLS and mTLS."""
    host_list = hosts or ["localhost", "127.0.0.1"]
    try:
        pki = write_test_pki(directory, host_list, clients or ["client"], days,
                             key_password=key_password)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    broker = pki.broker_properties()
    if key_password:
        broker["ssl.key.password"] = key_password
    broker_file = pki.ca.parent / "broker.properties"
    broker_file.write_text("".join(f"{k}={v}\n" for k, v in broker.items()))
    broker_file.chmod(0o600)
    properties: dict[str, dict[str, str]] = {}
    for name in pki.clients:
        props = pki.client_properties(name)
        if key_password:
            props["ssl.key.password"] = key_password
        properties[name] = props
        path = pki.ca.parent / f"client-{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        path.chmod(0o600)       # it may hold ssl.key.password
    if as_json:
        emit_json({"ca": str(pki.ca), "broker_cert": str(pki.broker_cert),
                   "broker_key": str(pki.broker_key), "hosts": host_list,
                   "broker_properties": broker,
                   "clients": {name: {"cert": str(cert), "key": str(key),
                                      "principal": f"User:CN={name}",
                                      "properties": properties[name]}
                               for name, (cert, key) in pki.clients.items()}})
        return
    lines = [f"ca           {pki.ca}",
             f"broker cert  {pki.broker_cert}   (SANs: {', '.join(host_list)})",
             f"broker key   {pki.broker_key}"]
    for name, (cert, key) in pki.clients.items():
        lines += [f"client {name}: {cert}  {key}   (mTLS principal User:CN={name})"]
    lines += ["", f"# the brokers' TLS settings, as {broker_file} (kaflite up {broker_file} "
              "-l PLAINTEXT=PLAINTEXT -l SASL_SSL=SASL_SSL):"]
    lines += [f"{k}={v}" for k, v in broker.items()]
    for name, props in properties.items():
        lines += ["", f"# client {name} over TLS, as {pki.ca.parent}/client-{name}.properties "
                  "(the certificate lines are for ssl.client.auth=required):"]
        lines += [f"{k}={v}" for k, v in props.items()]
    emit_lines(lines)
