"""Conditional sends (EXPECT_OFFSET): stored only as the queue's next message, else
CONFLICT saying where the queue is, nothing stored; a retry of one that was stored is
answered from its first try, not refused; a bad offset is refused plainly."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.protocol import Code, Op
from broker_core.protocol.conditional import PROP_EXPECT_OFFSET, conflict_at
from broker_core.protocol.idempotence import with_id
from broker_core.server.broker import Broker, BrokerConfig

pytestmark = pytest.mark.timeout(30)


def send(broker, body: bytes, expect, seq=None):
    frame = p.encode_send("reg", 0, p.OutMessage(body, properties={
        PROP_EXPECT_OFFSET: str(expect)}))
    flags = 0
    if seq is not None:
        frame, flags = with_id(0x5EED, seq, frame), p.FLAG_IDEMPOTENT
    header = p.Header(op=Op.SEND, flags=flags, code=0, request_id=1, length=len(frame))
    code, body = asyncio.run(broker.handle(header, frame))
    return code, (p.decode_send_answer(body)[1] if code == Code.OK else body.decode())


def test_a_conditional_send_is_stored_only_at_the_offset_it_expects(tmp_path):
    b = Broker(BrokerConfig("b1", tmp_path, segment_bytes=8 << 20))
    try:
        assert send(b, b"a", 0) == (Code.OK, 0)
        code, text = send(b, b"b", 0)
        assert code == Code.CONFLICT and conflict_at(text) == 1 and "nothing stored" in text
        assert send(b, b"b", 1) == (Code.OK, 1)
        assert b.store.queue_offsets("reg", 0)[1] == 2
        code, text = send(b, b"c", "x")
        assert code == Code.MESSAGE_ILLEGAL and "EXPECT_OFFSET" in text
        assert send(b, b"c", 2, seq=0) == (Code.OK, 2)
        assert send(b, b"c", 2, seq=0) == (Code.OK, 2)  # its retry: answered, not CONFLICT
        assert b.store.queue_offsets("reg", 0)[1] == 3
    finally:
        b.close()
