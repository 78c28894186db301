"""Frames: the 16-byte header every request and answer starts with, ops and codes.

Every frame is a 16-byte big-endian header followed by a body::

    u32 length      bytes after this field (12 + body), at most MAX_FRAME
    u16 magic       0xF10D
    u8  version     1
    u8  op          Op
    u8  flags       bit 0 RESPONSE, bit 1 ONEWAY (no response wanted), bit 2 IDEMPOTENT
                    (a SEND or SEND_MULTI body starts with its producer id and sequence:
                    protocol.idempotence)
    u8  reserved    0
    u16 code        Code: 0 in requests, the outcome in responses
    u32 request_id  echoed in the response
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from broker_core.errors import BrokerError

__all__ = [
    "MAGIC",
    "VERSION",
    "HEADER",
    "HEADER_SIZE",
    "LENGTH_SIZE",
    "MAX_FRAME",
    "FLAG_RESPONSE",
    "FLAG_ONEWAY",
    "FLAG_IDEMPOTENT",
    "FLAG_FIRST_TRY",
    "Op",
    "Code",
    "STORED_CODES",
    "BROKER_FAILURE_CODES",
    "ProtocolError",
    "FrameTooLarge",
    "Header",
    "encode_frame",
    "encode_answer",
    "decode_header",
    "FrameDecoder",
]

MAGIC = 0xF10D
VERSION = 1
HEADER = struct.Struct(">IHBBBBHI")
HEADER_SIZE = HEADER.size  # 16
LENGTH_SIZE = 4
MAX_FRAME = 8 * 1024 * 1024  # a 4 MiB message plus a batch's worth of headroom

FLAG_RESPONSE = 0x01
FLAG_ONEWAY = 0x02
FLAG_IDEMPOTENT = 0x04
FLAG_FIRST_TRY = 0x08  # an idempotent send's first try: no broker can hold its sequence


class Op(IntEnum):
    SEND = 1
    SEND_BATCH = 2
    PULL = 3
    QUERY_OFFSET = 4
    COMMIT_OFFSET = 5
    HEARTBEAT = 6
    STATS = 7
    ROUTE = 8  # topic -> number of queues on this broker
    HA_STATE = 9  # role, epoch, log end: what the controller asks before a promotion
    QUERY_BY_KEY = 10  # messages carrying a key (key index), within a time range
    VIEW_BY_ID = 11  # the message at a message id's physical offset
    QUERY_BY_TIME = 12  # a topic's messages stored within a time range (trace samples)
    LOCK_BATCH = 13  # an orderly consumer locks (or renews) queues of its group
    UNLOCK_BATCH = 14  # ... and releases them
    END_TRANSACTION = 15  # commit or roll back a half message
    CHECK_TRANSACTION = 16  # a transactional producer asks for the halves to check back
    LIST_TRANSACTIONS = 17  # the half messages pending here (the operator's `tx list`)
    AUTH_START = 18  # a connection's SCRAM-SHA-256 exchange (acl.handshake) ...
    AUTH_FINISH = 19  # ... and its end
    ACL = 20  # list or change users and rules (a super user's)
    SEND_MULTI = 21  # independent messages of one topic and queue in one frame (protocol.multi)
    STEP_ASIDE = 22  # a client's fuse found this raft leader slow (raft.step_aside)


class Code(IntEnum):
    OK = 0
    BAD_REQUEST = 1
    SYSTEM_ERROR = 2
    SYSTEM_BUSY = 3
    SERVICE_NOT_AVAILABLE = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11  # sync replication, no slave in sync: stored, not replicated
    FLUSH_SLAVE_TIMEOUT = 12  # sync replication, the in-sync slaves did not ack in time
    MESSAGE_TOO_LARGE = 13
    DISK_FULL = 14
    NOT_MASTER = 16  # this broker is a slave (or has no role yet): send to its group's master
    TOPIC_NOT_EXIST = 17
    MESSAGE_ILLEGAL = 18
    PULL_NOT_FOUND = 19  # body still carries offsets (NO_NEW_MSG, OFFSET_* ...)
    FLOW_CONTROL = 20  # over a topic's or group's quota: nothing stored; body has retry-after
    MESSAGE_NOT_FOUND = 21  # VIEW_BY_ID: no message at that offset (expired, never written)
    NO_PERMISSION = 22  # writes wiped, or the topic not writable / readable here: nothing done
    PULL_SESSION_GONE = 23  # a pull session unknown here or out of step: name every queue again
    SEQUENCE_EXPIRED = 24  # an idempotent retry older than the broker remembers: nothing
    # stored now; the first try may have been (protocol.idempotence)
    UNACKNOWLEDGED = 25  # stored here, then this master lost its role before its slaves held
    # it: the group's new master may hold it or not; not acknowledged
    FENCED = 26  # a transaction carrying a consumer group's offsets from a holder that lost
    # its queue (its lock moved, or the offsets moved past where it read from): rolled back
    CONFLICT = 27  # a conditional send (EXPECT_OFFSET): its queue is elsewhere; nothing stored


# Stored, if short of a promise: answered with the OK body (a send must not be repeated)
STORED_CODES = frozenset({Code.OK, Code.FLUSH_DISK_TIMEOUT, Code.FLUSH_SLAVE_TIMEOUT,
                          Code.SLAVE_NOT_AVAILABLE})
# A send the broker itself failed (an error, a backed-up write path, a full disk, a flush or
# a slave that did not answer in time): what says a broker is failing. The other errors
# refuse the caller's input (MESSAGE_TOO_LARGE, MESSAGE_ILLEGAL, TOPIC_NOT_EXIST), apply an
# operator's settings (NO_PERMISSION, FLOW_CONTROL) or point to the group's master
# (NOT_MASTER, as a slave should). SLAVE_NOT_AVAILABLE is stored on a master with no slave
# in sync: the group's alert, not a failed send.
BROKER_FAILURE_CODES = frozenset({Code.SYSTEM_ERROR, Code.SYSTEM_BUSY,
                                  Code.SERVICE_NOT_AVAILABLE, Code.DISK_FULL,
                                  Code.FLUSH_DISK_TIMEOUT, Code.FLUSH_SLAVE_TIMEOUT})


class ProtocolError(BrokerError):
    """A frame or body that does not follow PROTOCOL.md."""


class FrameTooLarge(ProtocolError):
    pass


class Header(NamedTuple):
    """A frame header's fields in wire order (a tuple: made once per frame, cheaply)."""

    length: int = 0
    magic: int = MAGIC
    version: int = VERSION
    op: int = 0
    flags: int = 0
    reserved: int = 0
    code: int = 0
    request_id: int = 0

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def oneway(self) -> bool:
        return bool(self.flags & FLAG_ONEWAY)


def encode_frame(
    op: int, request_id: int, body: bytes = b"", *, flags: int = 0, code: int = 0
) -> bytes:
    length = HEADER_SIZE - LENGTH_SIZE + len(body)
    if length > MAX_FRAME:
        raise FrameTooLarge(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return HEADER.pack(length, MAGIC, VERSION, op, flags, 0, code, request_id) + body


def encode_answer(op: int, request_id: int, code: int, body: bytes) -> bytes:
    """A response frame (the broker's answers are never too large: bodies are bounded)."""
    return HEADER.pack(HEADER_SIZE - LENGTH_SIZE + len(body), MAGIC, VERSION, op,
                       FLAG_RESPONSE, 0, code, request_id) + body


def _not_ours(head: bytes, magic: int) -> str:
    """Why a frame did not start with our magic, saying which port was meant when the
    other side spoke HTTP (an easy mix-up: a broker has a data port and an HTTP port)."""
    if head == b"HTTP":
        return ("an HTTP server answered: that is a broker's HTTP port; give its data (TCP) "
                "port (the HTTP port - 1 in a local cluster)")
    if head in (b"GET ", b"POST", b"HEAD", b"PUT ", b"DELE"):
        return ("an HTTP request on a broker's data port: /stats, /metrics and /admin are on "
                "its HTTP port (the data port + 1 in a local cluster)")
    return f"bad magic 0x{magic:04x}"


def decode_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> Header:
    """Parse the header at ``offset`` (caller ensures HEADER_SIZE bytes)."""
    h = Header._make(HEADER.unpack_from(buf, offset))
    if h.magic != MAGIC:
        raise ProtocolError(_not_ours(bytes(buf[offset:offset + 4]), h.magic))
    if h.version != VERSION:
        raise ProtocolError(f"unsupported protocol version {h.version}")
    if h.length < HEADER_SIZE - LENGTH_SIZE:
        raise ProtocolError(f"frame length {h.length} is shorter than a header")
    if h.length > MAX_FRAME:
        raise FrameTooLarge(f"frame of {h.length} bytes exceeds the {MAX_FRAME}-byte limit")
    return h


class FrameDecoder:
    """Incremental frame splitter for a byte stream (one per connection). A chunk that
    holds whole frames (the common case) is split without passing through the buffer."""

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[Header, bytes]]:
        """Add bytes; return the complete frames. ProtocolError poisons the stream."""
        if type(data) is not bytes:
            data = bytes(data)
        if self._buf:
            self._buf += data
            buf = self._buf
        else:
            buf = data
        frames = []
        pos = 0
        size = len(buf)
        while size - pos >= HEADER_SIZE:
            header = decode_header(buf, pos)
            end = pos + LENGTH_SIZE + header.length
            if end > size:
                break
            body = buf[pos + HEADER_SIZE : end]
            frames.append((header, body if buf is data else bytes(body)))
            pos = end
        if buf is data:
            if pos < size:
                self._buf += data[pos:]
        elif pos:
            del buf[:pos]
        return frames
