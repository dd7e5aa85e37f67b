"""kafkajs (Node.js): each producer and consumer is one ``node`` process.

The process runs ``kafkajs_driver.js`` and speaks JSON lines: a request
``{"id": n, "op": ...}`` on its stdin is answered by ``{"id": n, ...}`` on its
stdout, and lines without an id are events (a send's per-record acks, a new
group generation's assignment, a crash). A reader thread per process hands the
answers to the waiting call and the events to the adapter. Every call has a
timeout, and ``close()`` kills the process if it does not exit by itself.

kafkajs comes from npm: ``KAFLITE_KAFKAJS_DIR`` names a directory holding
``node_modules/kafkajs`` (or the ``node_modules`` itself); by default the
repository's ``tests/cluster/kafkajs`` (``tools/ensure_kafkajs.sh`` installs it).
``KAFLITE_VERIFY_KAFKAJS_LOG`` (``INFO``, ``DEBUG``...) lets kafkajs log to stderr.

How the library is driven, and why:

* The producer is idempotent (acks=all, one request in flight, as kafkajs
  requires). kafkajs has no send queue of its own (each ``send()`` is its own
  Produce request), so the adapter buffers the records of one tick and sends
  them, one record per ``send()`` (see ``KAFKAJS_RETRY`` below), one send after
  another. A record's offset is its send's ``baseOffset``. The driver pins each
  record's partition to kafkajs's first choice (``stickyPartitioner``).
* The consumer is kafkajs's push-based ``run({eachBatch})``: each batch waits
  in the driver until ``poll()`` takes it (backpressure), heartbeating; only a
  polled batch is resolved. kafkajs has no rebalance listener: a new generation
  (its ``GROUP_JOIN`` event, eager protocol) revokes the partitions it no longer
  holds and assigns the whole new assignment; a crash, which makes kafkajs leave
  the group before it restarts, revokes everything. These changes are handed to
  the listener on the workload's thread, in stream order with the polls.
* Transactions: ``producer.transaction()``; a commit after a failed send in the
  transaction is refused (abortable), as Kafka's own producer does; kafkajs does
  not retry EndTxn, and its failed commit or abort leaves the producer unusable
  (fatal: a new producer takes over the transactional id). The txn workload runs
  only with ``KAFLITE_VERIFY_KAFKAJS_TXN=1``: it fails on kafkajs's own bugs
  (``KAFKAJS_TXN``), so it is not among the rounds or the soak.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from kaflite.verify.clients._base import (
    TP,
    AckFn,
    ClientFactory,
    ConsumerClient,
    Context,
    Listener,
    ProducerClient,
    Record,
    TxnFailure,
    decode,
)

__all__ = ["KafkaJS", "kafkajs_modules", "missing"]

DRIVER = Path(__file__).with_name("kafkajs_driver.js")
REPO_DIR = Path(__file__).resolve().parents[4] / "tests" / "cluster" / "kafkajs"
CALL_TIMEOUT = 60.0
MAX_EVENTS = 2000
# kafkajs error types after which the producer cannot go on: it was fenced or lost its id.
FATAL_TYPES = {"INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING",
               "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "INVALID_TXN_STATE"}

Message = dict[str, Any]     # one JSON line from the driver


def kafkajs_modules() -> Path | None:
    """The ``node_modules`` directory that holds kafkajs, if there is one."""
    env = os.environ.get("KAFLITE_KAFKAJS_DIR")
    base = Path(env) if env else REPO_DIR
    for cand in (base / "node_modules", base):
        if (cand / "kafkajs" / "package.json").is_file():
            return cand
    return None


def missing() -> str | None:
    """Why kafkajs cannot run here, or None if it can."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if kafkajs_modules() is None:
        where = os.environ.get("KAFLITE_KAFKAJS_DIR") or str(REPO_DIR)
        return (f"kafkajs is not installed under {where} (run tools/ensure_kafkajs.sh, or set "
                "KAFLITE_KAFKAJS_DIR to a directory with node_modules/kafkajs)")
    return None


class KafkajsError(Exception):
    def __init__(self, answer: Message) -> None:
        super().__init__(str(answer.get("error")))
        self.type: str | None = answer.get("type")
        self.send_failed = bool(answer.get("sendFailed"))


class _Node:
    """One driver process: calls with timeouts, events to ``on_event`` (reader thread)."""

    @classmethod
    def connected(cls, spec: dict[str, Any], on_event: Callable[[Message], None]) -> _Node:
        """A driver whose client has connected (the process is killed if it cannot)."""
        node = cls(spec, on_event)
        try:
            node.call("connect", 30)
        except Exception:
            node.close(1)
            raise
        return node

    def __init__(self, spec: dict[str, Any], on_event: Callable[[Message], None]) -> None:
        why = missing()
        if why is not None:
            raise RuntimeError(f"kafkajs cannot run: {why}")
        node = cast(str, shutil.which("node"))
        env = dict(os.environ, NODE_PATH=str(kafkajs_modules()))
        level = os.environ.get("KAFLITE_VERIFY_KAFKAJS_LOG")
        if level:
            spec = {**spec, "logLevel": level.upper()}
        self.proc = subprocess.Popen(
            [node, str(DRIVER), json.dumps(spec)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None if level else subprocess.PIPE, text=True,
            bufsize=1, env=env)
        self.on_event = on_event
        self.ids = itertools.count(1)
        self.lines = itertools.count()
        self.waiting: dict[int, tuple[threading.Event, list[Message]]] = {}
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.dead: str | None = None
        self.stderr: deque[str] = deque(maxlen=20)
        threading.Thread(target=self._read, daemon=True, name="kafkajs-reader").start()
        if self.proc.stderr is not None:
            threading.Thread(target=self._read_stderr, daemon=True,
                             name="kafkajs-stderr").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.strip():
                continue
            try:
                msg: Message = json.loads(line)
            except ValueError:
                self.stderr.append(f"stdout: {line.rstrip()}")
                continue
            msg["_line"] = next(self.lines)
            if "id" in msg:
                with self.lock:
                    slot = self.waiting.pop(msg["id"], None)
                if slot is not None:
                    slot[1].append(msg)
                    slot[0].set()
            else:
                try:
                    self.on_event(msg)
                except Exception as exc:      # never let an event kill the reader
                    self.stderr.append(f"event {msg.get('event')}: {exc!r}")
        self.dead = f"the kafkajs process exited ({self.proc.poll()})"
        with self.lock:
            slots, self.waiting = list(self.waiting.values()), {}
        for event, _ in slots:
            event.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def call(self, op: str, timeout: float = CALL_TIMEOUT, **args: Any) -> Message:
        """Send one request and wait for its answer; raise KafkajsError if it failed."""
        if self.dead is not None:
            raise RuntimeError(f"{self.dead}; stderr: {list(self.stderr)[-5:]}")
        n = next(self.ids)
        event, box = threading.Event(), cast(list[Message], [])
        with self.lock:
            self.waiting[n] = (event, box)
        try:
            with self.write_lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"id": n, "op": op, **args}) + "\n")
                self.proc.stdin.flush()
        except OSError as exc:
            with self.lock:
                self.waiting.pop(n, None)
            raise RuntimeError(f"kafkajs process gone: {exc!r}") from exc
        if not event.wait(timeout):
            with self.lock:
                self.waiting.pop(n, None)
            raise TimeoutError(f"kafkajs {op}: no answer within {timeout:.0f} s")
        if not box:
            raise RuntimeError(f"kafkajs {op}: {self.dead}; stderr: {list(self.stderr)[-5:]}")
        if "error" in box[0]:
            raise KafkajsError(box[0])
        return box[0]

    def close(self, timeout: float) -> None:
        """Ask kafkajs to disconnect, then end the process (killed if it lingers)."""
        try:
            if self.dead is None:
                self.call("close", timeout)
        except Exception:
            pass
        finally:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class _Events:
    """The client's control-plane events, for ``events()``."""

    def __init__(self) -> None:
        self.items: deque[tuple[float, str]] = deque(maxlen=MAX_EVENTS)

    def add(self, text: str) -> None:
        self.items.append((time.time(), text))


def _txn_failure(exc: BaseException, abortable: bool = False) -> TxnFailure:
    if isinstance(exc, KafkajsError):
        if exc.type in FATAL_TYPES:
            return TxnFailure("fatal", str(exc))
        if exc.send_failed or abortable:
            return TxnFailure("abortable", str(exc))
    return TxnFailure("fatal", repr(exc))


class _Producer(ProducerClient):
    def __init__(self, servers: str, client_id: str, txn_id: str | None) -> None:
        self.acks: dict[int, AckFn] = {}
        self.lock = threading.Lock()
        self.seqs = itertools.count()
        self.buffer: list[tuple[str, dict[str, Any]]] = []
        self.log = _Events()
        self.node = _Node.connected({"role": "producer", "brokers": servers,
                                     "clientId": client_id, "transactionalId": txn_id},
                                    self._event)

    def _event(self, msg: Message) -> None:
        if msg.get("event") != "acks":
            self.log.add(json.dumps(msg))
            return
        for seq, partition, offset, error in msg["acks"]:
            with self.lock:
                on_ack = self.acks.pop(seq, None)
            if error is not None and "no answer for partition" in error:
                self.log.add(error)
            if on_ack is not None:
                on_ack(partition, offset, error)

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        seq = next(self.seqs)
        with self.lock:
            self.acks[seq] = on_ack
        self.buffer.append((topic, {"seq": seq, "value": str(value),
                                    "key": str(value) if keyed else None}))
        if len(self.buffer) >= 500:
            self._push()

    def _push(self) -> None:
        """Hand the buffered records to kafkajs: one send() per topic."""
        buffered, self.buffer = self.buffer, []
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, record in buffered:
            by_topic.setdefault(topic, []).append(record)
        for topic, records in by_topic.items():
            try:
                self.node.call("send", 30, topic=topic, records=records)
            except Exception as exc:
                for r in records:
                    with self.lock:
                        on_ack = self.acks.pop(r["seq"], None)
                    if on_ack is not None:
                        on_ack(None, None, f"not handed to kafkajs: {exc!r}")

    def tick(self, seconds: float) -> None:
        self._push()
        time.sleep(seconds)

    def flush(self, timeout: float) -> None:
        self._push()
        self.node.call("flush", timeout)

    def close(self) -> None:
        try:
            self.flush(10)
        except Exception as exc:
            self.log.add(f"flush at close: {exc!r}")
        self.node.close(10)

    def events(self) -> list[tuple[float, str]]:
        return list(self.log.items)

    # -- transactions ---------------------------------------------------------------------
    def init_transactions(self) -> None:
        try:
            self.node.call("init", 60)
        except Exception as exc:
            raise _txn_failure(exc) from exc

    def begin(self) -> None:
        try:
            self.node.call("begin", 30)
        except Exception as exc:
            raise _txn_failure(exc) from exc

    def send_offsets(self, offsets: dict[TP, int], consumer: ConsumerClient) -> None:
        self._push()
        group = cast(_Consumer, consumer).group
        try:
            self.node.call("sendOffsets", 60, group=group,
                           offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])
        except Exception as exc:   # the transaction is still open: it can be aborted
            raise _txn_failure(exc, abortable=isinstance(exc, KafkajsError)) from exc

    def commit(self) -> None:
        self._push()
        try:
            self.node.call("commit", 60)
        except Exception as exc:
            raise _txn_failure(exc) from exc

    def abort(self) -> None:
        self._push()
        try:
            self.node.call("abort", 60)
        except Exception as exc:
            raise _txn_failure(exc) from exc


class _Consumer(ConsumerClient):
    def __init__(self, servers: str, client_id: str, group: str | None, isolation: str,
                 listener: Listener | None) -> None:
        self.group = group or f"{client_id}-nogroup"
        self.listener = listener
        self.current: set[TP] = set()
        self.inbox: list[Message] = []        # group events not yet handed to the listener
        self.lock = threading.Lock()
        self.log = _Events()
        self.node = _Node.connected({"role": "consumer", "brokers": servers,
                                     "clientId": client_id, "groupId": self.group,
                                     "isolation": isolation}, self._event)

    def _event(self, msg: Message) -> None:
        with self.lock:
            self.inbox.append(msg)

    def _dispatch(self, before: int | None = None) -> None:
        """Hand the listener the group events that came before line ``before``."""
        with self.lock:
            due = [m for m in self.inbox if before is None or m["_line"] < before]
            self.inbox = [m for m in self.inbox if m not in due]
        for msg in due:
            kind = msg.get("event")
            if kind == "join":
                assignment: dict[str, list[int]] = msg.get("assignment") or {}
                new = {(t, p) for t, parts in assignment.items() for p in parts}
                self.log.add(f"group join: {sorted(new)}")
                self._revoke(self.current - new)
                self.current = new
                if self.listener is not None:
                    self.listener.assigned(sorted(new))
            elif kind == "crash":
                self.log.add(f"crash (restart: {msg.get('restart')}): {msg.get('error')}")
                self._revoke(self.current)     # kafkajs leaves the group, then rejoins
                self.current = set()
            else:
                self.log.add(json.dumps(msg))

    def _revoke(self, tps: set[TP]) -> None:
        if tps and self.listener is not None:
            self.listener.revoked(sorted(tps), False)

    def subscribe(self, topics: list[str]) -> None:
        self.node.call("subscribe", 60, topics=topics)

    def assign(self, tps: list[TP]) -> None:
        raise NotImplementedError("kafkajs has no manual assignment (the runner drains "
                                  "the topics with kaflite's own consumer)")

    def poll(self, timeout: float) -> list[Record]:
        self._dispatch()
        answer = self.node.call("poll", timeout + 30, timeoutMs=int(timeout * 1000))
        self._dispatch(answer["_line"])
        records: list[list[Any]] = answer["ok"]
        return [(t, p, o, decode(v.encode() if v is not None else None))
                for t, p, o, v in records]

    def commit(self, offsets: dict[TP, int]) -> None:
        self.node.call("commit", 30, offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])

    def seek(self, tp: TP, offset: int) -> None:
        self.node.call("seek", 10, topic=tp[0], partition=tp[1], offset=offset)

    def close(self) -> None:
        try:
            self.node.close(20)
        finally:
            self._dispatch()

    def events(self) -> list[tuple[float, str]]:
        return list(self.log.items)


KAFKAJS_RETRY = (
    "kafkajs 2.2.4 retries a send() only on the brokers that have not answered it yet: "
    "a partition whose leader moved to a broker that did answer (for another partition "
    "of the same send) is never sent, yet send() resolves; the partition's producer "
    "sequence is then reused by the next batch, which the broker rightly answers as a "
    "duplicate of the first, at the first one's offset: acknowledged writes lost "
    "(tulios/kafkajs#1303, open; fix proposed in PR #1798). Seen with --client kafkajs "
    "--workload queue --seconds 60 --seed 591842323 (lost-write 4, duplicate 5). Worked "
    "around, not left out: the adapter sends one record per send(), so a send has one "
    "partition and its retry goes to the new leader")

KAFKAJS_TXN = (
    "kafkajs 2.2.4's read_committed filter (src/consumer/filterAbortedMessages.js) "
    "starts at most one aborted transaction per record and expects the Fetch answer's "
    "aborted transactions sorted by first offset (Kafka lists them by marker offset), "
    "so records of interleaved aborted transactions reach the application (G1a, seen "
    "with --workload txn --nemesis crash --seconds 15 --seed 23: transformer-1 read "
    "vin-1 offset 13 of aborted txn-producer-1-5, which kaflite's own read_committed "
    "drain skipped); and kafkajs sends TxnOffsetCommit v0-v2 only (no KIP-447 member and "
    "generation), so a transformer that lost its partitions in a rebalance still commits "
    "their output and offsets (duplicates in read_committed, seeds 21 and 22). No "
    "upstream issue found for either")


class KafkaJS(ClientFactory):
    name = "kafkajs"
    stalls = False      # no max.poll.interval.ms: its runner pulls batches by itself
    resubscribes = False   # a running kafkajs consumer cannot change its subscription
    # The adapter does transactions, but kafkajs fails the txn workload by itself
    # (KAFKAJS_TXN): it runs only on request, to reproduce.
    transactions = os.environ.get("KAFLITE_VERIFY_KAFKAJS_TXN") == "1"

    def unavailable(self) -> str | None:
        return missing()

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _Producer(servers, client_id, txn_id)

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _Consumer(servers, client_id, group, isolation, listener)
