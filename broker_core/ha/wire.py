"""The replication link between a slave and its master (the master's HA port).

Frames: u32 body length, u8 kind, body. Control frames carry JSON, the
stream two fixed binary forms. A link goes:

    slave  -> HELLO {name, group, epoch, offset, segment_bytes, history}
    master -> WELCOME {epoch, history, offset}     stream starts at `offset`
            | TRUNCATE {offset, epoch}              cut your log there, then reconnect
            | REFUSE {reason}                        not master, wrong group, ...
    master -> DATA (offset, master end, master time ms, epoch, commit, bytes) ...
              (no bytes: a heartbeat, after HEARTBEAT_S with nothing sent; commit: where
              a raft group's majority holds the log, -1 from a master)
    master -> META {topics, offsets}                 the master's topic and offset tables
    master -> CONFIG {offset, members}               a raft group's: the members a record
                                                     at `offset` names, ahead of its bytes
    slave  -> ACK (offset)                           complete records held below offset
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator
from typing import Any

from broker_core.errors import BrokerError

HELLO, WELCOME, TRUNCATE, REFUSE, DATA, META, ACK, CONFIG = range(1, 9)
KIND_NAMES = {HELLO: "HELLO", WELCOME: "WELCOME", TRUNCATE: "TRUNCATE", REFUSE: "REFUSE",
              DATA: "DATA", META: "META", ACK: "ACK", CONFIG: "CONFIG"}
FRAME = struct.Struct(">IB")
DATA_HEAD = struct.Struct(">qqqIq")  # offset, master write offset, master time ms, epoch,
# commit (-1: none)
ACK_BODY = struct.Struct(">q")
CHUNK = 1 << 20  # at most this many log bytes per DATA frame
MAX_BODY = CHUNK + DATA_HEAD.size + 4096
HEARTBEAT_S = 1.0


class LinkError(BrokerError):
    """The replication link broke or carried something it should not."""


def frames(buf: bytearray) -> Iterator[tuple[int, bytes, int]]:
    """The complete frames at the front of `buf`, in order: (kind, body, the offset just
    past it). LinkError on a frame no link sends (the stream cannot be trusted after)."""
    pos, size = 0, len(buf)
    while size - pos >= FRAME.size:
        length, kind = FRAME.unpack_from(buf, pos)
        if length > MAX_BODY or kind not in KIND_NAMES:
            raise LinkError(f"bad replication frame: kind {kind}, {length} bytes")
        end = pos + FRAME.size + length
        if end > size:
            return
        yield kind, bytes(buf[pos + FRAME.size : end]), end
        pos = end


def frame(kind: int, body: bytes) -> bytes:
    return FRAME.pack(len(body), kind) + body


def json_frame(kind: int, doc: dict[str, Any]) -> bytes:
    return frame(kind, json.dumps(doc, separators=(",", ":")).encode())


def data_frame(offset: int, master_end: int, master_ms: int, epoch: int,
               data: bytes | memoryview = b"", commit: int = -1) -> bytes:
    return b"".join(data_frame_parts(offset, master_end, master_ms, epoch, data, commit))


_DATA_FRAME_HEAD = struct.Struct(">IB" + DATA_HEAD.format.lstrip(">"))


def data_frame_parts(offset: int, master_end: int, master_ms: int, epoch: int,
                     data: bytes | memoryview, commit: int = -1
                     ) -> tuple[bytes, bytes | memoryview]:
    """A DATA frame as (head, data), for a gather write without copying the data."""
    return _DATA_FRAME_HEAD.pack(DATA_HEAD.size + len(data), DATA, offset, master_end,
                                 master_ms, epoch, commit), data


def ack_frame(offset: int) -> bytes:
    return frame(ACK, ACK_BODY.pack(offset))


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    try:
        length, kind = FRAME.unpack(await reader.readexactly(FRAME.size))
        if length > MAX_BODY or kind not in KIND_NAMES:
            raise LinkError(f"bad replication frame: kind {kind}, {length} bytes")
        return kind, await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise LinkError("replication link closed by peer") from None


def decode_json(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise LinkError("replication control frame is not JSON") from None
    if not isinstance(doc, dict):
        raise LinkError("replication control frame is not a JSON object")
    return doc


def decode_data(body: bytes) -> tuple[int, int, int, int, int, memoryview]:
    """(offset, master end, master ms, epoch, commit, bytes)."""
    if len(body) < DATA_HEAD.size:
        raise LinkError("short DATA frame")
    offset, end, ms, epoch, commit = DATA_HEAD.unpack_from(body)
    return offset, end, ms, epoch, commit, memoryview(body)[DATA_HEAD.size:]


def decode_ack(body: bytes) -> int:
    if len(body) != ACK_BODY.size:
        raise LinkError("bad ACK frame")
    return ACK_BODY.unpack(body)[0]
