"""Replaying a recorded session against another broker, and the scorecard.

Each recorded connection gets a connection of its own to the other broker; its
requests go in their recorded order, each at its recorded offset in time (or when
the answer before it came, if later), with Kafka's identities rewritten into the
ones the other broker minted so far (``substitute``). A request also waits until
every answer the client had already received, on any connection, when it sent it
in the recording has come back in the replay and been compared: that is where
the pairs of identities it names are learnt (the node a KIP-1242 ApiVersions names
comes from a Metadata answer on the bootstrap connection). Each answer is compared with
the recorded one (``diff``). Timing matters for the requests that wait (a Fetch's
long poll, a JoinGroup): replaying at the recorded pace keeps their answers
comparable.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field

from kaflite.protocol import decode_response, encode_request
from kaflite.protocol.messages import REGISTRY, ProduceRequest
from kaflite.testing.conformance._compare import Diff, Identities, diff, substitute
from kaflite.testing.conformance._record import Recorded

__all__ = ["Outcome", "replay", "scorecard"]


@dataclass
class Outcome:
    recorded: Recorded
    answer: object | None = None   # the other broker's response
    diffs: list[Diff] = field(default_factory=list)
    error: str | None = None       # the replay could not get an answer


class _Wire:
    """One plain connection: a request out, its answer back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.corr = itertools.count(1)

    async def exchange(self, rec: Recorded, timeout: float) -> object | None:
        corr = next(self.corr)
        self.writer.writelines(encode_request(rec.api_key, rec.version, corr, rec.client_id,
                                              rec.request))
        if isinstance(rec.request, ProduceRequest) and rec.request.acks == 0:
            return None
        size = int.from_bytes(await asyncio.wait_for(self.reader.readexactly(4), timeout))
        frame = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        return decode_response(frame, rec.api_key, rec.version)[1]

    def close(self) -> None:
        self.writer.close()


class _Seen:
    """The answers replayed so far, by the time they came in the recording."""

    def __init__(self, recording: list[Recorded]) -> None:
        answered = sorted((r.answered_at, r.seq) for r in recording
                          if r.answered_at is not None)
        self._times = [t for t, _ in answered]
        self._seqs = [seq for _, seq in answered]
        self._done = {seq: asyncio.Event() for seq in self._seqs}

    def settle(self, rec: Recorded) -> None:
        event = self._done.get(rec.seq)
        if event is not None:
            event.set()

    async def before(self, rec: Recorded) -> None:
        """Wait for every answer the client had received before it sent ``rec``
        (its own connection's come first anyway). Acyclic: each of them was sent
        before ``rec`` was."""
        n = bisect.bisect_left(self._times, rec.sent_at)
        for seq in self._seqs[:n]:
            await self._done[seq].wait()


async def _replay_connection(records: list[Recorded], host: str, port: int, t0: float,
                             ids: Identities, out: dict[int, Outcome], seen: _Seen) -> None:
    wire: _Wire | None = None
    pending = iter(records)
    current: Recorded | None = None
    try:
        wire = _Wire(*await asyncio.open_connection(host, port))
        for rec in pending:
            current = rec
            await seen.before(rec)
            await asyncio.sleep(max(0.0, t0 + rec.sent_at - time.monotonic()))
            outcome = out[rec.seq] = Outcome(rec)
            substitute(rec.request, rec.version, ids)
            try:
                answer = await wire.exchange(rec, 60)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                outcome.error = f"{type(exc).__name__}: {exc}"
                return
            outcome.answer = answer
            if rec.response is not None and answer is not None:
                outcome.diffs = list(diff(rec.response, answer, rec.version,  # type: ignore[arg-type]
                                          ids))
            seen.settle(rec)
            current = None
    finally:
        if wire is not None:
            wire.close()
        for rec in itertools.chain([current] if current else [], pending):
            seen.settle(rec)    # not replayed: nobody waits for them


async def replay(recording: list[Recorded], bootstrap: str) -> list[Outcome]:
    """Replay ``recording`` against the one broker at ``bootstrap`` (host:port)."""
    host, _, port = bootstrap.rpartition(":")
    by_connection: dict[int, list[Recorded]] = defaultdict(list)
    for rec in recording:
        by_connection[rec.connection].append(rec)
    ids = Identities()
    out: dict[int, Outcome] = {}
    t0 = time.monotonic()
    seen = _Seen(recording)
    await asyncio.gather(*(_replay_connection(recs, host, int(port), t0, ids, out, seen)
                           for recs in by_connection.values()))
    return [out[seq] for seq in sorted(out)]


def scorecard(outcomes: list[Outcome]) -> dict[tuple[str, int], list[Outcome]]:
    """The outcomes per (API name, version)."""
    table: dict[tuple[str, int], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        info = REGISTRY.get(o.recorded.api_key)
        name = info.name if info is not None else str(o.recorded.api_key)
        table[(name, o.recorded.version)].append(o)
    return dict(sorted(table.items()))
