"""Frames: split at any byte boundary, whole chunks without a copy through the buffer,
bad headers named."""

import struct

import pytest

from broker_core import protocol as p


def test_frames_split_at_any_byte_boundary():
    frames = b"".join(p.encode_frame(p.Op.SEND, i, b"x" * i) for i in range(1, 30))
    decoder = p.FrameDecoder()
    got = []
    for i in range(0, len(frames), 7):
        got += decoder.feed(frames[i : i + 7])
    assert [h.request_id for h, _ in got] == list(range(1, 30))
    assert all(body == b"x" * h.request_id for h, body in got)
    assert decoder.pending == 0


@pytest.mark.parametrize(
    "raw, message",
    [
        (struct.pack(">IHBBBBHI", 12, 0xBEEF, 1, 1, 0, 0, 0, 1), "bad magic"),
        (struct.pack(">IHBBBBHI", 12, p.MAGIC, 9, 1, 0, 0, 0, 1), "version"),
        (struct.pack(">IHBBBBHI", 3, p.MAGIC, 1, 1, 0, 0, 0, 1), "shorter than a header"),
        (struct.pack(">IHBBBBHI", p.MAX_FRAME + 1, p.MAGIC, 1, 1, 0, 0, 0, 1), "exceeds"),
    ],
)
def test_bad_headers_are_named(raw, message):
    with pytest.raises(p.ProtocolError, match=message):
        p.FrameDecoder().feed(raw)


def test_a_chunk_of_whole_frames_and_one_split_across_chunks():
    frames = [p.encode_frame(p.Op.PULL, i, bytes([i]) * 50) for i in range(1, 4)]
    decoder = p.FrameDecoder()
    got = decoder.feed(frames[0] + frames[1] + frames[2][:20])  # two whole, one begun
    assert [(h.request_id, b) for h, b in got] == [(1, b"\x01" * 50), (2, b"\x02" * 50)]
    assert decoder.pending == 20
    got = decoder.feed(frames[2][20:])
    assert [(h.request_id, b) for h, b in got] == [(3, b"\x03" * 50)] and decoder.pending == 0
    got = decoder.feed(bytearray(frames[0]))  # any bytes-like chunk
    assert got[0][1] == b"\x01" * 50 and type(got[0][1]) is bytes


def test_answers_are_response_frames():
    frame = p.encode_answer(p.Op.STATS, 9, p.Code.SYSTEM_BUSY, b"busy")
    header = p.decode_header(frame)
    assert header.is_response and not header.oneway
    assert (header.op, header.request_id, header.code) == (p.Op.STATS, 9, p.Code.SYSTEM_BUSY)
    assert frame[p.HEADER_SIZE:] == b"busy"


def test_http_on_either_side_is_named_not_a_bad_magic():
    with pytest.raises(p.ProtocolError, match="an HTTP server answered: that is a broker's HTTP"):
        p.decode_header(b"HTTP/1.0 400 Bad request\r\n\r\n")
    with pytest.raises(p.ProtocolError, match="an HTTP request on a broker's data port"):
        p.decode_header(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(p.ProtocolError, match="bad magic"):
        p.decode_header(bytes(p.HEADER_SIZE))
