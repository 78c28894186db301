"""An idempotent send on the wire: the producer id and sequence a retry repeats.

A producer (client.idempotence) picks a random 63-bit id when it starts and numbers
its sends to each broker group 0, 1, 2, ...; a retry of a send keeps its number. A
frame flagged FLAG_IDEMPOTENT carries them in front of its SEND or SEND_MULTI body:

    producer id (u64) | sequence (u32: a SEND_MULTI's messages take seq, seq+1, ...)

and FLAG_FIRST_TRY when the sequence was never sent before (no broker can hold it: a
new master still reading back what it holds stores it at once, and refuses only
retries), and each stored record keeps its pair as the property PSEQ ("<id hex>.<seq>"), so
that a broker that restarts, or a slave promoted in its master's place, knows what
it already holds from the CommitLog (server.producer_seqs). Kafka's idempotent
producer (KIP-98) does the same per partition, with contiguous sequences; here
sequences may skip (a send refused by one group goes to another with that group's
next number), so the broker remembers which numbers it holds, not the last one.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker_core.protocol.frame import FLAG_FIRST_TRY, Op

ID_HEAD = struct.Struct(">QI")  # producer id, (first) sequence
PROP_PRODUCER_SEQ = "PSEQ"
MAX_SEQ = 0xFFFFFFFF


def with_id(pid: int, seq: int, body: bytes) -> bytes:
    """`body` (a SEND or SEND_MULTI body) as an idempotent frame carries it."""
    return ID_HEAD.pack(pid, seq) + body


class SendId(NamedTuple):
    """An idempotent send: its producer, its (first) sequence, and whether this is the
    sequence's first try (FLAG_FIRST_TRY)."""
    pid: int
    seq: int
    first: bool = False


def split_id(op: int, body: bytes, flags: int = 0) -> tuple[SendId, bytes]:
    """(its SendId, the SEND or SEND_MULTI body behind it) of a frame flagged
    FLAG_IDEMPOTENT (`flags`: the frame's); ValueError for another op or a body too
    short."""
    if op != Op.SEND and op != Op.SEND_MULTI:
        raise ValueError(f"op {op} cannot be idempotent (only SEND and SEND_MULTI)")
    if len(body) < ID_HEAD.size:
        raise ValueError(f"an idempotent frame of {len(body)} bytes has no producer id")
    pid, seq = ID_HEAD.unpack_from(body)
    return SendId(pid, seq, bool(flags & FLAG_FIRST_TRY)), body[ID_HEAD.size:]


def seq_field(pid: int, seq: int) -> str:
    """The record's PSEQ property, as send_ops appends it (\\x01 and \\x02 delimited)."""
    return f"{PROP_PRODUCER_SEQ}\x01{pid:x}.{seq}\x02"


def parse_seq(value: str) -> tuple[int, int] | None:
    """(producer id, sequence) of a record's PSEQ value; None when it is not one."""
    pid, _, seq = value.partition(".")
    try:
        return int(pid, 16), int(seq)
    except ValueError:
        return None
