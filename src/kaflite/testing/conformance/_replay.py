"""Replaying a recorded session against another broker, and the scorecard.

Each recorded connection gets a connection of its own to the other broker; its
requests go in their recorded order, each at its recorded offset in time (or when
the answer before it came, if later), with Kafka's identities rewritten into the
ones the other broker minted so far (``substitute``). Each answer is compared with
the recorded one (``diff``). Timing matters for the requests that wait (a Fetch's
long poll, a JoinGroup): replaying at the recorded pace keeps their answers
comparable.
"""

from __future__ import annotations

import asyncio
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


async def _replay_connection(records: list[Recorded], host: str, port: int, t0: float,
                             ids: Identities, out: dict[int, Outcome]) -> None:
    wire: _Wire | None = None
    try:
        wire = _Wire(*await asyncio.open_connection(host, port))
        for rec in records:
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
    finally:
        if wire is not None:
            wire.close()


async def replay(recording: list[Recorded], bootstrap: str) -> list[Outcome]:
    """Replay ``recording`` against the one broker at ``bootstrap`` (host:port)."""
    host, _, port = bootstrap.rpartition(":")
    by_connection: dict[int, list[Recorded]] = defaultdict(list)
    for rec in recording:
        by_connection[rec.connection].append(rec)
    ids = Identities()
    out: dict[int, Outcome] = {}
    t0 = time.monotonic()
    await asyncio.gather(*(_replay_connection(recs, host, int(port), t0, ids, out)
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
