"""ReplicaLog: master bytes written at their offsets give a byte-identical log and
the same queues, whatever the chunking; truncation cuts and reports."""

import random

import pytest

from broker_core.errors import StoreCorruptError
from broker_core.store import MessageStore
from broker_core.store.replica import ReplicaGapError


def fill(store, n, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        body = bytes([i % 251]) * rng.randrange(10, 3000)
        assert store.put(f"t{i % 3}", i % 4, body, tags=f"tag{i % 5}").ok
    return store.commitlog.write_offset


def stream(master, replica_store, chunks, start=0):
    """Send master bytes [start, end) in chunks no longer than `chunks` (random sizes)."""
    rng = random.Random(1)
    cl, log = master.commitlog, replica_store.replica_log()
    pos, end, touched = start, cl.write_offset, set()
    while pos < end:
        seg = cl.segment_for(pos)
        n = min(end, seg.end_offset, pos + rng.randrange(1, chunks)) - pos
        touched |= log.append(pos, cl.read(pos, n))
        pos += n
    return touched


def log_bytes(store, end):
    out = bytearray()
    for seg in store.commitlog.segments:
        out += seg.mm[: max(0, min(seg.size, end - seg.start_offset))]
    return bytes(out)


def queues(store):
    return {q: [(m.queue_offset, m.body, m.tags) for m in
                store.get(q[0], q[1], 0, 10_000).messages] for q in store.queues()}


@pytest.fixture
def pair(tmp_path, small_config):
    master = MessageStore(tmp_path / "m", small_config())
    slave = MessageStore(tmp_path / "s", small_config())
    yield master, slave
    for s in (master, slave):
        s.close()


@pytest.mark.parametrize("chunks", [7, 500, 70_000])
def test_identical_bytes_and_queues_across_segment_rolls(pair, chunks):
    master, slave = pair
    end = fill(master, 300)
    assert len(master.commitlog.segments) > 3  # rolls with END-OF-FILE blanks
    touched = stream(master, slave, chunks)
    assert slave.commitlog.write_offset == end
    assert log_bytes(slave, end) == log_bytes(master, end)
    assert queues(slave) == queues(master)
    assert touched == set(master.queues())
    assert [s.start_offset for s in slave.commitlog.segments] == \
        [s.start_offset for s in master.commitlog.segments]


def test_partial_record_waits_and_offset_counts_whole_records(pair):
    master, slave = pair
    fill(master, 2)
    first = master.get("t0", 0, 0).messages[0]
    log = slave.replica_log()
    log.append(0, master.commitlog.read(0, first.size - 1))
    assert log.offset == 0 and log.received == first.size - 1
    assert slave.queue_offsets("t0", 0) == (0, 0)
    log.append(first.size - 1, master.commitlog.read(first.size - 1, 1))
    assert log.offset == first.size and slave.queue_offsets("t0", 0) == (0, 1)


def test_gap_and_corruption_are_refused(pair):
    master, slave = pair
    fill(master, 3)
    log = slave.replica_log()
    with pytest.raises(ReplicaGapError):
        log.append(100, b"x" * 10)
    raw = bytearray(master.commitlog.read(0, master.commitlog.write_offset))
    raw[120] ^= 0xFF  # inside the first body: its CRC fails
    with pytest.raises(StoreCorruptError):
        log.append(0, bytes(raw))


def test_truncate_cuts_tail_and_reopens_clean(tmp_path, small_config):
    store = MessageStore(tmp_path / "s", small_config())
    fill(store, 50)
    keep = store.get("t1", 1, 0, 3).messages[-1]
    cut_at = keep.physical_offset + keep.size
    end = store.commitlog.write_offset
    cut = store.replica_log().truncate(cut_at)
    assert 0 < cut <= end - cut_at
    assert store.commitlog.write_offset == cut_at
    assert all(m.physical_offset < cut_at for q in store.queues()
               for m in store.get(q[0], q[1], 0, 1000).messages)
    assert store.put("t1", 1, b"after").ok
    store.close()
    again = MessageStore(tmp_path / "s", small_config())
    try:
        assert again.recovery.truncated_bytes == 0
        assert again.get("t1", 1, 0, 100).messages[-1].body == b"after"
    finally:
        again.close()


def test_queue_units_carry_the_same_tag_hashes(pair):
    master, slave = pair
    for i, (tags, keys, props) in enumerate([("paid", None, None), (None, "k1", None),
                                             ("a||b", "k2", {"x": "TAGS"}), (None, None, None),
                                             ("t", None, {"TAGSX": "1"})]):
        assert master.put("tagged", 0, b"m%d" % i, tags=tags, keys=keys, properties=props).ok
    stream(master, slave, 10_000)
    units = [list(s.queue_table.get_or_create("tagged", 0).units(0, 10)) for s in pair]
    assert units[0] == units[1] and len(units[0]) == 5
    assert slave.get("tagged", 0, 0, 10, tag="paid").messages[0].body == b"m0"
