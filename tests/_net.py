"""Socket helpers shared by tests that speak the wire protocol by hand."""

from __future__ import annotations

import socket

_CHUNK = 1 << 20


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes (one ``recv`` may return fewer, with a timeout set too);
    ``ConnectionError`` if the peer closes first."""
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), _CHUNK))
        if not chunk:
            raise ConnectionError(f"the peer closed the connection after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
