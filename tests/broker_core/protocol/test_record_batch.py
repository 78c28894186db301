"""Records served as stored: the broker serves only records that are the ones their
queue units point at; the consumer verifies each one's CRC, skips a bad one and
counts it, and refuses an answer it cannot frame."""

from __future__ import annotations

import pytest

from broker_core.protocol.record import CorruptRecord, topic_field
from broker_core.protocol.record_batch import check_record, decode_records
from broker_core.store import MessageStore


@pytest.fixture
def store(tmp_path, small_config):
    s = MessageStore(tmp_path / "s", small_config())
    yield s
    s.close()


def records(store, n=3):
    for i in range(n):
        assert store.put("orders", 1, f"body-{i}".encode(), tags="t", keys=f"k{i}").ok
    got = store.get_records("orders", 1, 0, 32)
    assert got.status.value == "FOUND" and len(got.messages) == n
    return list(got.messages)


def test_served_records_decode_to_what_get_reads(store):
    raw = records(store)
    msgs, corrupt, end = decode_records(b"".join(raw), 0, len(raw))
    assert corrupt == 0 and end == sum(len(r) for r in raw)
    want = store.get("orders", 1, 0, 32).messages
    assert [(m.body, m.tags, m.keys, m.msg_id, m.queue_offset) for m in msgs] == \
        [(m.body, m.tags, m.keys, m.msg_id, m.queue_offset) for m in want]


def test_a_record_whose_crc_fails_is_skipped_and_counted_the_rest_read(store):
    raw = records(store)
    bad = bytearray(raw[1])
    bad[100] ^= 0xFF  # in the body
    msgs, corrupt, _end = decode_records(raw[0] + bytes(bad) + raw[2], 0, 3)
    assert corrupt == 1 and [m.body for m in msgs] == [b"body-0", b"body-2"]


def test_an_answer_that_cannot_be_framed_is_refused(store):
    raw = records(store)
    with pytest.raises(CorruptRecord):
        decode_records(raw[0] + raw[1][:40], 0, 2)  # truncated in a header
    shifted = bytearray(raw[0])
    shifted[4] ^= 0xFF  # the magic
    with pytest.raises(CorruptRecord):
        decode_records(bytes(shifted), 0, 1)


def test_the_broker_serves_a_record_only_as_its_queue_units_record(store):
    records(store, 1)
    cl = store.commitlog
    seg = cl.segments[0]
    size = check_record(seg.mm, 0, 0, seg.size, 1, 0, topic_field("orders"))
    assert size == store.get("orders", 1, 0, 1).messages[0].size
    for queue, offset, topic in ((2, 0, "orders"), (1, 5, "orders"), (1, 0, "other")):
        with pytest.raises(CorruptRecord):
            check_record(seg.mm, 0, 0, seg.size, queue, offset, topic_field(topic))
