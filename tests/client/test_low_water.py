"""The receive low-water mark while a large frame arrives (``kaflite._lowat``)."""

from __future__ import annotations

import asyncio
import socket
import struct
from types import SimpleNamespace
from typing import Any

import pytest

from kaflite._loop import run
from kaflite._lowat import CAP, ReceiveLowWater
from kaflite.net.connection import _Protocol
from kaflite.protocol.framing import FrameDecoder


class FakeSocket:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if self.fail:
            raise OSError("not supported")
        assert (level, option) == (socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        self.calls.append(value)


def test_mark_follows_the_missing_bytes_and_returns_to_one() -> None:
    sock = FakeSocket()
    lw = ReceiveLowWater(sock)
    lw.update(0)                      # no large frame: nothing to change
    lw.update(10 * CAP)               # a large frame starts: at most CAP
    lw.update(10 * CAP - 1000)        # still more than CAP: no new call
    lw.update(5000)                   # the last piece
    lw.update(0)                      # done: back to 1
    assert sock.calls == [CAP, 5000, 1]
    assert lw.mark == 1


def test_a_fixed_receive_buffer_halves_the_cap() -> None:
    sock = FakeSocket()
    lw = ReceiveLowWater(sock, receive_buffer=65536)
    lw.update(1 << 20)
    assert sock.calls == [32768]


def test_a_refused_option_is_left_alone() -> None:
    lw = ReceiveLowWater(FakeSocket(fail=True))
    lw.update(1 << 20)
    lw.update(0)
    assert lw.mark == 1


@pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="no SO_RCVLOWAT here")
def test_large_frame_in_slow_pieces_then_a_small_one() -> None:
    """A frame trickling in, then a small frame: every byte arrives, nothing stalls."""
    run(_large_then_small())


async def _large_then_small() -> None:
    big = bytes(range(256)) * (6 * 4096)           # 6 MiB
    small = b"tail"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(struct.pack(">i", len(big)))
        for i in range(0, len(big), len(big) // 3):
            writer.write(big[i:i + len(big) // 3])
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(struct.pack(">i", len(small)) + small)
        await writer.drain()
        await reader.read()          # until the client closes
        writer.close()

    frames: list[bytes] = []
    marks: list[int] = []
    got_all = asyncio.Event()

    def on_frame(frame: Any) -> None:
        frames.append(bytes(frame))
        if len(frames) == 2:
            got_all.set()

    class Frames:   # the protocol object's receive side, recording raw frames
        decoder = FrameDecoder(1 << 26)

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.decoder.get_buffer(sizehint)

        def buffer_updated(self, nbytes: int) -> list[Any]:
            for frame in self.decoder.buffer_updated(nbytes):
                on_frame(frame)
            return []

    conn = SimpleNamespace(state=Frames(), on_events=lambda events: None,
                           _fail=lambda exc: pytest.fail(f"connection failed: {exc!r}"),
                           address="test", local_address="")
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    proto = _Protocol(conn)  # type: ignore[arg-type]
    transport, _ = await loop.create_connection(lambda: proto, "127.0.0.1", port)
    sock = transport.get_extra_info("socket")

    class Recording(ReceiveLowWater):
        def update(self, awaiting: int) -> None:
            super().update(awaiting)
            marks.append(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))

    proto.low_water = Recording(sock)
    try:
        await asyncio.wait_for(got_all.wait(), 30)
        assert frames == [big, small]
        assert max(marks) > 1                         # the mark was raised meanwhile
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    finally:
        transport.close()
        server.close()
        await server.wait_closed()
