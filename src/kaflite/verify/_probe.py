"""A liveness probe: how long each broker takes to answer ApiVersions during a run.

A broker whose event loop is starved answers every request late, and ApiVersions
is the cheapest request there is (no log, no group, no lock), so its round trip
is the loop's own delay plus the network's. Issue 36's wedged cluster answered
none within 20-60 s. The probe keeps one connection to each broker and sends an
ApiVersions v0 every ``interval_s``, one at a time, on its own thread; a broker
that is down (the nemesis killed or stopped it) is retried, and those attempts
are counted, not timed. The run's statistics get the p99 and the worst round
trip, in milliseconds.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

__all__ = ["ApiVersionsProbe"]

API_VERSIONS = 18
CLIENT_ID = b"kaflite-verify-probe"


def _request(correlation_id: int) -> bytes:
    # Request header v1 (api key, version 0, correlation id, client id), empty body.
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(body)) + body


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


class ApiVersionsProbe:
    def __init__(self, servers: str, interval_s: float = 0.2, timeout_s: float = 60.0) -> None:
        self.addresses = [(h, int(p)) for h, _, p in
                          (s.strip().rpartition(":") for s in servers.split(",") if s.strip())]
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.rtts_ms: list[float] = []
        self.unreachable = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apiversions-probe",
                                        daemon=True)

    def start(self) -> ApiVersionsProbe:
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        """Stop probing; the statistics for the run's summary."""
        self._stop.set()
        self._thread.join(self.timeout_s + 5)
        ordered = sorted(self.rtts_ms)
        if not ordered:
            return {"apiversions unreachable": self.unreachable}
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return {"apiversions probes": len(ordered),
                "apiversions p99 (ms)": round(p99),
                "apiversions worst (ms)": round(ordered[-1]),
                "apiversions unreachable": self.unreachable}

    def _run(self) -> None:
        socks: dict[tuple[str, int], socket.socket] = {}
        correlation = 0
        try:
            while not self._stop.wait(self.interval_s):
                for address in self.addresses:
                    correlation += 1
                    try:
                        sock = socks.get(address)
                        if sock is None:
                            sock = socket.create_connection(address, timeout=1.0)
                            sock.settimeout(self.timeout_s)
                            socks[address] = sock
                        started = time.perf_counter()
                        sock.sendall(_request(correlation))
                        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
                        _read_exactly(sock, size)
                        self.rtts_ms.append((time.perf_counter() - started) * 1000)
                    except OSError:
                        self.unreachable += 1
                        dropped = socks.pop(address, None)
                        if dropped is not None:
                            dropped.close()
        finally:
            for sock in socks.values():
                sock.close()
