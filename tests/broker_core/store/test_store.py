"""MessageStore through its API: round trips, statuses, tag filters, locking, stats."""

from __future__ import annotations

import os
import random

import pytest

from broker_core.errors import BrokerError, StoreConfigError, StoreLockedError
from broker_core.protocol.record import BLANK_MAGIC, HEADER_SIZE
from broker_core.store import GetStatus, MessageStore, PutStatus, StoreConfig
from broker_core.store.mapped_file import file_name


def test_round_trip_across_segment_boundaries(tmp_path, small_config):
    cfg = small_config()
    rng = random.Random(7)
    sent = {}
    with MessageStore(tmp_path, cfg) as store:
        for i in range(600):
            topic, qid = f"T{i % 3}", i % 4
            body = rng.randbytes(rng.choice((0, 1, 50, 1000, 4000, 8 * 1024)))
            r = store.put(topic, qid, body, tags=f"t{i % 5}", keys=[f"k{i}", "x"])
            assert r.status is PutStatus.PUT_OK
            sent[(topic, qid, r.queue_offset)] = (body, r.physical_offset, f"t{i % 5}", f"k{i} x")
        segments = store.stats()["commitlog"]["segments"]
        assert segments >= 10
        _check_all(store, sent)
    # Every segment but the last ends with an END-OF-FILE blank marker.
    names = sorted(os.listdir(tmp_path / "commitlog"))
    assert names[0] == file_name(0) and len(names[0]) == 20
    with MessageStore(tmp_path, cfg) as store:
        assert store.recovery.records_replayed == 0  # clean restart: nothing to scan
        _check_all(store, sent)
        seg = store.commitlog.segments[0]
        end = _walk_to_blank(seg.mm)
        assert int.from_bytes(seg.mm[end + 4 : end + 8], "big") == BLANK_MAGIC


def _walk_to_blank(mm) -> int:
    pos = 0
    while int.from_bytes(mm[pos + 4 : pos + 8], "big") != BLANK_MAGIC:
        pos += int.from_bytes(mm[pos : pos + 4], "big")
    return pos


def _check_all(store, sent):
    for (topic, qid, qo), (body, phys, tags, keys) in sent.items():
        got = store.get(topic, qid, qo, max_msgs=1)
        assert got.status is GetStatus.FOUND
        m = got.messages[0]
        assert (m.topic, m.queue_id, m.queue_offset, m.body) == (topic, qid, qo, body)
        assert (m.physical_offset, m.tags, m.keys) == (phys, tags, keys)
        assert m.store_timestamp > 0


def test_record_layout_is_rocketmq_big_endian(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(clock=lambda: 1700000000.5)) as store:
        store.put("orders", 2, b"hello", tags="paid", properties={"region": "hz"})
        raw = store.commitlog.segments[0].mm[:200]
    be = lambda a, b: int.from_bytes(raw[a:b], "big")  # noqa: E731
    size = be(0, 4)
    assert be(4, 8) == 0xDAA320A7
    assert be(12, 16) == 2  # queue id
    assert be(20, 28) == 0 and be(28, 36) == 0  # queue offset, physical offset
    assert be(40, 48) == be(56, 64) == 1700000000500  # born and store timestamps, ms
    assert raw[64:72] == bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")  # store host
    assert be(84, 88) == 5 and raw[88:93] == b"hello"
    assert raw[93] == 6 and raw[94:100] == b"orders"
    props_len = be(100, 102)
    assert size == HEADER_SIZE + 5 + 1 + 6 + 2 + props_len
    assert b"TAGS\x01paid\x02" in raw[102 : 102 + props_len]


def test_put_batch_gives_consecutive_offsets(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        store.put("T", 0, b"first")
        r = store.put_batch("T", 0, [b"a" * 150] * 40, tags="b")
        assert r.status is PutStatus.PUT_OK and r.count == 40 and r.queue_offset == 1
        got = store.get("T", 0, 1, max_msgs=100)
        assert [m.queue_offset for m in got.messages] == list(range(1, 41))
        assert all(m.body == b"a" * 150 and m.tags == "b" for m in got.messages)
        assert got.next_offset == 41
        assert store.put_batch("T", 0, []).status is PutStatus.MESSAGE_ILLEGAL
        too_big = store.put_batch("T", 0, [b"x" * 5000, b"y" * 5000])
        assert too_big.status is PutStatus.MESSAGE_ILLEGAL
        assert store.queue_offsets("T", 0) == (0, 41)


def test_tag_filter(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        for i in range(30):
            store.put("T", 0, str(i).encode(), tags=("a", "b", "c")[i % 3] if i % 10 else None)
        a = store.get("T", 0, 0, max_msgs=100, tag="a")
        assert a.status is GetStatus.FOUND
        assert [m.body for m in a.messages] == [str(i).encode() for i in range(3, 30, 3)]
        ab = store.get("T", 0, 0, max_msgs=3, tag="a || b")
        assert [m.tags for m in ab.messages] == ["b", "a", "b"]
        assert ab.next_offset == 5  # just past the last message returned
        assert len(store.get("T", 0, 0, max_msgs=100, tag="*").messages) == 30
        assert len(store.get("T", 0, 0, max_msgs=100).messages) == 30
        none = store.get("T", 0, 0, max_msgs=100, tag="zzz")
        assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_offset == 30


def test_get_statuses(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        assert store.get("nope", 0, 0).status is GetStatus.NO_NEW_MSG
        assert store.get("nope", 0, 5).status is GetStatus.OFFSET_OVERFLOW
        for _ in range(3):
            store.put("T", 1, b"x")
        got = store.get("T", 1, 3)
        assert (got.status, got.next_offset, got.min_offset, got.max_offset) == (
            GetStatus.NO_NEW_MSG, 3, 0, 3,
        )  # fmt: skip
        over = store.get("T", 1, 9)
        assert over.status is GetStatus.OFFSET_OVERFLOW and over.next_offset == 3
        assert store.get("T", 1, -1).status is GetStatus.OFFSET_TOO_SMALL
        with pytest.raises(BrokerError):
            store.get("T", 1, 0, max_msgs=0)
        with pytest.raises(BrokerError, match="offset must be an int"):
            store.get("T", 1, "0")


@pytest.mark.parametrize(
    "topic, qid, body, kw, why",
    [
        ("T", 0, b"x" * (8 * 1024 + 1), {}, "over the 8192 byte limit"),
        ("bad topic", 0, b"x", {}, "topic must be"),
        ("", 0, b"x", {}, "topic must be"),
        ("T" * 128, 0, b"x", {}, "topic must be"),
        ("T", -1, b"x", {}, "queue id"),
        ("T", "0", b"x", {}, "queue id"),
        ("T", 0, "text", {}, "body must be bytes"),
        ("T", 0, b"x", {"tags": "a\x01b"}, "must not contain"),
        ("T", 0, b"x", {"properties": {"TAGS": "x"}}, "reserved"),
        ("T", 0, b"x", {"properties": {"k": "v" * 40000}}, "properties take"),
    ],
)
def test_illegal_messages_are_refused_without_writing(
    tmp_path, small_config, topic, qid, body, kw, why
):
    with MessageStore(tmp_path, small_config()) as store:
        r = store.put(topic, qid, body, **kw)
        assert r.status is PutStatus.MESSAGE_ILLEGAL and why in r.reason
        assert store.commitlog.write_offset == 0
        assert store.put("T", 0, b"fine").status is PutStatus.PUT_OK


def test_second_store_on_the_same_dir_fails_clearly(tmp_path, small_config):
    store = MessageStore(tmp_path, small_config())
    assert (tmp_path / "abort").exists()
    with pytest.raises(StoreLockedError, match=f"in use by another store \\(pid {os.getpid()}\\)"):
        MessageStore(tmp_path, small_config())
    store.close()
    assert not (tmp_path / "abort").exists()
    MessageStore(tmp_path, small_config()).close()
    assert store.put("T", 0, b"x").status is PutStatus.SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize(
    "kw",
    [
        {"flush": "sometimes"},
        {"commitlog_segment_bytes": 1000},
        {"commitlog_segment_bytes": 64 * 1024, "max_message_bytes": 60 * 1024},
        {"disk_max_used_ratio": 0.95},
        {"consumequeue_units_per_file": 0},
    ],
)
def test_bad_config_is_a_clear_error(kw):
    with pytest.raises(StoreConfigError):
        StoreConfig(**kw)


def test_latency_histograms_and_take(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        for _ in range(50):
            store.put("T", 0, b"x" * 100)
        store.put_batch("T", 0, [b"y"] * 5)
        store.get("T", 0, 0)
        assert store.latency["put"].count == 50
        assert store.latency["put_batch"].count == 1
        assert store.latency["get"].count == 1
        taken = store.take_latency()
        assert taken["put"].hist.count == 50 and taken["put"].hist.quantile(0.5) > 0
        assert store.latency["put"].count == 0  # reset by take
        stats = store.stats()
        assert stats["counters"]["put_msgs"] == 55
        assert stats["commitlog"]["max_offset"] == store.commitlog.write_offset
        assert stats["puts_over_20ms"] == stats["over_20ms"]["put"]  # exact: test_flush.py


def test_a_batch_is_one_block_in_one_segment(tmp_path, small_config):
    seg = 64 * 1024
    with MessageStore(tmp_path, small_config()) as store:
        while store.commitlog.write_offset < seg - 3000:
            store.put("T", 0, b"f" * 1000)
        r = store.put_batch("T", 1, [b"b" * 1000] * 5)
        assert r.status is PutStatus.PUT_OK and r.physical_offset == seg  # rolled first, whole
        got = store.get("T", 1, 0, max_msgs=10).messages
        assert [m.physical_offset for m in got] == [seg + i * got[0].size for i in range(5)]
        many = store.put_batch("T", 1, [b""] * 1000)
        assert many.status is PutStatus.MESSAGE_ILLEGAL and "segment" in many.reason
        assert store.queue_offsets("T", 1) == (0, 5)
