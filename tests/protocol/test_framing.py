"""Headers, frames and the stream splitter."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol import (
    FrameDecoder,
    RemoteProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from kaflite.protocol.framing import EAGER_MAX, SPARE_MAX, SPARES
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataRequestTopic,
    ProduceRequest,
)


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(3, 8) == 1  # Metadata v8: not flexible
    assert request_header_version(3, 9) == 2
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    # ApiVersions responses always use header v0, even at flexible versions.
    assert request_header_version(18, 3) == 2
    assert response_header_version(18, 3) == 0
    # ControlledShutdown v0 has header v0 (no client id).
    assert request_header_version(7, 0) == 0
    assert request_header_version(7, 1) == 1


def test_request_header_v2_keeps_a_classic_client_id() -> None:
    frame = b"".join(encode_request(18, 3, 7, "abc", ApiVersionsRequest("kaflite", "0.1")))
    # size, api key 18, version 3, correlation 7, client id: int16 length 3 + "abc"
    assert frame[4:17] == struct.pack(">hhih", 18, 3, 7, 3) + b"abc"
    assert frame[17] == 0  # header v2's empty tagged-field section
    header, body = decode_request(frame[4:])
    assert header.client_id == "abc" and header.correlation_id == 7
    assert body == ApiVersionsRequest("kaflite", "0.1")


def test_response_round_trip_and_api_versions_header_v0() -> None:
    body = ApiVersionsResponse(error_code=35)
    frame = b"".join(encode_response(18, 3, 99, body))
    # Header v0: only the correlation id, no tagged-field byte.
    assert frame[4:8] == struct.pack(">i", 99)
    header, decoded = decode_response(frame[4:], 18, 3)
    assert header.correlation_id == 99 and decoded == body


def test_large_records_are_not_copied_into_the_frame() -> None:
    payload = bytes(50_000)
    from kaflite.protocol.messages import produce_request as pr  # type: ignore[attr-defined]

    req = ProduceRequest(
        acks=-1, timeout_ms=1000,
        topic_data=[pr.TopicProduceData("t", partition_data=[pr.PartitionProduceData(0, payload)])],
    )
    chunks = encode_request(0, 9, 1, "c", req)
    assert any(c is payload for c in chunks)
    _, decoded = decode_request(b"".join(chunks)[4:])
    assert isinstance(decoded, ProduceRequest)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == payload


def test_unknown_api_key_and_bad_version_are_protocol_errors() -> None:
    with pytest.raises(RemoteProtocolError, match="unknown API key"):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))
    with pytest.raises(RemoteProtocolError, match="no version"):
        decode_request(struct.pack(">hhih", 3, 99, 1, -1))


def frames_of(chunks: list[bytes]) -> list[bytes]:
    decoder = FrameDecoder()
    out: list[bytes] = []
    for chunk in chunks:
        out += [bytes(f) for f in decoder.feed(chunk)]
    assert decoder.pending == 0
    return out


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.binary(max_size=300), max_size=10),
    st.lists(st.integers(1, 500), min_size=1, max_size=50),
)
def test_frame_decoder_splits_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    chunks, pos, i = [], 0, 0
    while pos < len(stream):
        n = cuts[i % len(cuts)]
        chunks.append(stream[pos:pos + n])
        pos += n
        i += 1
    assert frames_of(chunks) == payloads


def test_frame_decoder_fills_big_frames_in_place() -> None:
    big = bytes(range(256)) * 2000  # 512,000 bytes: beyond the shared buffer
    small = b"xyz"
    stream = struct.pack(">i", 3) + small + struct.pack(">i", len(big)) + big + struct.pack(">i", 3) + small
    decoder = FrameDecoder()
    got: list[bytes] = []
    pos = 0
    while pos < len(stream):  # emulate a BufferedProtocol transport
        buf = decoder.get_buffer()
        n = min(len(buf), 7000, len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        got += [bytes(f) for f in decoder.buffer_updated(n)]
    assert got == [small, big, small]



def _big_frame(fill: int, size: int) -> bytes:
    return struct.pack(">i", size) + bytes([fill]) * size


def test_frame_decoder_reuses_large_buffers_only_once_they_are_free() -> None:
    decoder = FrameDecoder()

    def buffer_id(frame: object) -> int:
        return id(frame.obj if isinstance(frame, memoryview) else frame)

    first = decoder.feed(_big_frame(1, 700_000))[0]
    held = memoryview(first)[10:20]  # a view of the first frame, still in use
    ids = {buffer_id(first)}
    del first
    second = decoder.feed(_big_frame(2, 600_000))[0]
    ids.add(buffer_id(second))
    third = decoder.feed(_big_frame(3, 500_000))[0]
    # Both earlier buffers are still in use: a third one, and no bytes overwritten.
    assert buffer_id(third) not in ids
    assert bytes(held) == b"\x01" * 10
    assert bytes(second) == b"\x02" * 600_000
    assert bytes(third) == b"\x03" * 500_000
    ids.add(buffer_id(third))  # all three kept as spares (SPARES of them at most)
    del second, third, held
    # Nothing refers to them now: the next frame that fits fills one of them again.
    fourth = decoder.feed(_big_frame(4, 400_000))[0]
    assert isinstance(fourth, memoryview) and buffer_id(fourth) in ids
    assert bytes(fourth) == b"\x04" * 400_000
    # A frame larger than every free spare gets a buffer of its own.
    fifth = decoder.feed(_big_frame(5, 900_000))[0]
    assert bytes(fifth) == b"\x05" * 900_000 and bytes(fourth) == b"\x04" * 400_000


def test_frame_decoder_keeps_at_most_spares_buffers() -> None:
    """Frames held at once (a broker's queued Produce requests) each get a buffer;
    only the last ``SPARES`` are kept for reuse, and a free one is filled again."""
    decoder = FrameDecoder()
    frames = [decoder.feed(_big_frame(i, 400_000 + i))[0] for i in range(SPARES + 2)]
    ids = [id(f.obj) if isinstance(f, memoryview) else id(f) for f in frames]
    assert len(set(ids)) == SPARES + 2          # all in use: none shared
    assert all(bytes(f) == bytes([i]) * (400_000 + i) for i, f in enumerate(frames))
    kept = set(ids[-SPARES:])
    del frames
    again = [decoder.feed(_big_frame(9, 300_000))[0] for _ in range(SPARES)]
    assert {id(f.obj) for f in again if isinstance(f, memoryview)} == kept


def test_frame_decoder_refuses_oversized_and_negative_sizes() -> None:
    with pytest.raises(RemoteProtocolError, match="frame size"):
        FrameDecoder(max_frame_size=1000).feed(struct.pack(">i", 1001))
    with pytest.raises(RemoteProtocolError, match="frame size"):
        FrameDecoder().feed(struct.pack(">i", -5))


def test_metadata_request_round_trips_through_a_frame() -> None:
    req = MetadataRequest(topics=[MetadataRequestTopic(name="events")], allow_auto_topic_creation=False)
    for v in (4, 9, 12):
        header, body = decode_request(b"".join(encode_request(3, v, 5, None, req))[4:])
        assert header.client_id is None and body == req


def test_an_announced_size_is_not_allocated_before_its_bytes_arrive() -> None:
    decoder = FrameDecoder()
    size = 100_000_000
    assert decoder.feed(struct.pack(">i", size) + bytes(1024)) == []
    assert decoder.held <= EAGER_MAX and decoder.awaiting == size - 1024
    decoder.close()
    assert decoder.held == 0


def test_a_large_frame_grows_as_it_arrives_and_arrives_whole() -> None:
    size = 5 * EAGER_MAX + 12345
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    decoder = FrameDecoder()
    stream = struct.pack(">i", size) + payload + struct.pack(">i", 3) + b"end"
    helds, got, pos = [], [], 0
    while pos < len(stream):
        buf = decoder.get_buffer()
        n = min(len(buf), 300_000, len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        got += [bytes(f) for f in decoder.buffer_updated(n)]
        helds.append(decoder.held)
    assert got == [payload, b"end"]
    # doubling from EAGER_MAX: never more than twice what had arrived
    assert helds[0] <= EAGER_MAX and max(helds) <= SPARE_MAX
    assert sorted(set(helds) - {0})[:2] == [EAGER_MAX, 2 * EAGER_MAX]


def test_frames_beyond_the_eager_size_reuse_a_free_buffer() -> None:
    decoder = FrameDecoder()
    size = 6 * EAGER_MAX

    def buffer_id(frame: object) -> int:
        return id(frame.obj if isinstance(frame, memoryview) else frame)

    ids = set()
    for fill in range(4):
        frame = decoder.feed(struct.pack(">i", size) + bytes([fill]) * size)[0]
        assert bytes(frame[:3]) == bytes([fill]) * 3 and len(frame) == size
        ids.add(buffer_id(frame))
        del frame
    assert len(ids) == 1   # grown once, then filled again in place


def test_a_frame_no_larger_than_twice_one_received_gets_its_buffer_at_once() -> None:
    decoder = FrameDecoder()
    size = 3 * EAGER_MAX
    assert decoder.feed(struct.pack(">i", size) + bytes(size))   # grown as it came
    assert decoder.feed(struct.pack(">i", 2 * size) + bytes(10)) == []
    assert decoder.held == 2 * size                               # trusted: whole at once
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", 2 * size) + bytes(10)) == []
    assert decoder.held == EAGER_MAX                              # a stranger: not trusted
