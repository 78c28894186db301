"""The key index: lookups across segment rolls and index files, hash collisions,
time ranges, retention, a slave's copy, and bad keys and offsets."""

from __future__ import annotations

import os
import zlib

import pytest

from broker_core.errors import MessageIllegalError, MessageNotFoundError
from broker_core.message_id import decode_id, encode_id
from broker_core.store import MessageStore
from broker_core.store.index_file import key_hash

T0 = 1_794_355_200.0  # 2026-11-11 00:00 UTC
HOUR = 3600.0


# Two different keys with the same 32-bit hash: found once by a birthday search over
# order-0, order-1, ... (32 M tries, 25 s: kept here rather than searched per run).
COLLIDING = ("order-29685295", "order-32060020")


def test_every_key_found_across_segment_rolls(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        ids = {}
        for i in range(400):
            r = store.put("orders", i % 4, b"p" * 700, keys=[f"order-{i}", f"user-{i % 7}"])
            ids[i] = r.physical_offset
        assert len(store.commitlog.segments) > 3
        for i in (0, 1, 99, 250, 399):
            got = store.query_by_key(f"order-{i}").messages
            assert [m.physical_offset for m in got] == [ids[i]]
            assert got[0].keys.split() == [f"order-{i}", f"user-{i % 7}"]
        user = store.query_by_key("user-3", limit=1000).messages
        assert sorted(m.physical_offset for m in user) == sorted(
            ids[i] for i in range(400) if i % 7 == 3)
        assert [m.physical_offset for m in user] == sorted(
            (m.physical_offset for m in user), reverse=True)  # newest first
        assert store.query_by_key("order-5", topic="payments").messages == []
        assert store.query_by_key("order-400").messages == []


def test_a_hot_key_over_many_index_files_with_colliding_slots(tmp_path, small_config):
    # 5 slots and 40 entries a file: every chain mixes keys, 1,200 entries need 30 files
    with MessageStore(tmp_path, small_config(index_slots=5, index_entries=40)) as store:
        for i in range(600):
            store.put("orders", 0, b"x" * 50, keys=["hot", f"k{i}"])
        assert len(store.index.files) >= 30
        hot = store.query_by_key("hot", limit=10_000)
        assert len(hot.messages) == 600 and not hot.more
        assert [m.keys.split()[1] for m in hot.messages[:3]] == ["k599", "k598", "k597"]
        limited = store.query_by_key("hot", limit=25)
        assert len(limited.messages) == 25 and limited.more
        for i in (0, 17, 333, 599):
            got = store.query_by_key(f"k{i}").messages
            assert [m.keys for m in got] == [f"hot k{i}"]


def test_a_full_hash_collision_is_filtered_out(tmp_path, small_config):
    a, b = COLLIDING
    assert key_hash(a) == key_hash(b) == zlib.crc32(a.encode())
    with MessageStore(tmp_path, small_config()) as store:
        ra = store.put("orders", 0, b"a", keys=a)
        rb = store.put("orders", 0, b"b", keys=b)
        got = store.query_by_key(a)
        assert [m.physical_offset for m in got.messages] == [ra.physical_offset]
        assert got.candidates == 2  # both came out of the index; the record check told them apart
        assert [m.body for m in store.query_by_key(b).messages] == [b"b"]
        assert rb.ok


def test_time_range_and_a_file_per_time_span(tmp_path, small_config):
    now = [T0]
    with MessageStore(tmp_path, small_config(clock=lambda: now[0], index_span_s=HOUR)) as s:
        for h in range(5):
            now[0] = T0 + h * HOUR + 1
            s.put("orders", 0, f"hour {h}".encode(), keys="order-42")
        assert len(s.index.files) == 5  # one per hour
        ms = int(T0 * 1000)
        got = s.query_by_key("order-42", begin_ms=ms + int(1.5 * HOUR * 1000),
                             end_ms=ms + int(3.5 * HOUR * 1000)).messages
        assert [m.body for m in got] == [b"hour 3", b"hour 2"]
        assert len(s.query_by_key("order-42").messages) == 5


def test_retention_deletes_index_files_with_their_segments(tmp_path, small_config):
    now = [T0]
    cfg = small_config(clock=lambda: now[0], index_entries=30)
    with MessageStore(tmp_path, cfg) as store:
        for i in range(80):
            store.put("orders", 0, b"o" * 4000, keys=f"old-{i}")
        now[0] = T0 + 10 * HOUR
        for i in range(40):
            store.put("orders", 0, b"y" * 4000, keys=f"young-{i}")
        files = len(store.index.files)
        report = store.retention.run_once(now=T0 + 72 * HOUR + 1)
        assert report.expired >= 3
        floor = store.commitlog.min_offset
        assert len(store.index.files) < files
        assert all(f.end_phys >= floor for f in store.index.files)
        assert store.query_by_key("old-0").messages == []  # expired: not a dangling hit
        assert [m.body[:1] for m in store.query_by_key("young-39").messages] == [b"y"]
        assert len(os.listdir(tmp_path / "index")) == len(store.index.files)
    with MessageStore(tmp_path, cfg) as store:  # and the same after a restart
        assert store.query_by_key("old-0").messages == []
        assert len(store.query_by_key("young-0").messages) == 1


def test_message_at_and_ids(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(store_host="10.1.2.3:10911")) as store:
        r = store.put("orders", 1, b"hello", keys="order-1", tags="paid")
        msg = store.message_at(r.physical_offset)
        assert (msg.body, msg.tags, msg.store_host) == (b"hello", "paid", "10.1.2.3:10911")
        assert decode_id(msg.msg_id) == ("10.1.2.3:10911", r.physical_offset)
        assert msg.msg_id == encode_id("10.1.2.3:10911", r.physical_offset)
        with pytest.raises(MessageNotFoundError, match="no message starts at offset 3"):
            store.message_at(r.physical_offset + 3)
        with pytest.raises(MessageNotFoundError, match="never written"):
            store.message_at(10**9)
        for bad in ("", "two words", " lead"):
            with pytest.raises(MessageIllegalError, match="one non-empty word"):
                store.query_by_key(bad)


def test_a_slave_indexes_what_it_replicates(tmp_path, small_config):
    master = MessageStore(tmp_path / "m", small_config())
    slave = MessageStore(tmp_path / "s", small_config())
    try:
        for i in range(120):
            master.put("orders", i % 2, b"z" * 900, keys=f"order-{i}")
        cl, log = master.commitlog, slave.replica_log()
        pos = 0
        while pos < cl.write_offset:
            seg = cl.segment_for(pos)
            n = min(cl.write_offset, seg.end_offset, pos + 5000) - pos
            log.append(pos, cl.read(pos, n))
            pos += n
        for i in (0, 77, 119):
            [m] = slave.query_by_key(f"order-{i}").messages
            assert m.msg_id == master.query_by_key(f"order-{i}").messages[0].msg_id
        log.truncate(master.query_by_key("order-100").messages[0].physical_offset)
        assert slave.query_by_key("order-100").messages == []
        assert len(slave.query_by_key("order-99").messages) == 1
    finally:
        master.close()
        slave.close()


def _pages_cached(path) -> int:
    """Pages of `path` in the page cache (mincore over a mapping of the whole file)."""
    import ctypes
    import mmap

    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = ctypes.create_string_buffer(pages)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as mm:
        view = ctypes.c_char.from_buffer(mm)
        try:
            assert libc.mincore(ctypes.addressof(view), size, vec) == 0, ctypes.get_errno()
        finally:
            del view  # the mapping cannot close while exported
    return sum(b & 1 for b in vec.raw)


def test_a_new_index_file_caches_its_header_page_not_the_disks_readahead(tmp_path):
    """The header's write is the new file's first fault: under the file's default advice
    it read MiBs ahead (8 MiB on the project's VM: 2-3 ms quiet, 20-30 ms at a demo's
    start, on a master and its slave at once)."""
    from broker_core.store.index_file import IndexFile

    path = tmp_path / "index-0"
    f = IndexFile.create(str(path), 131_072, 100_000, 0, 0)
    try:
        assert _pages_cached(path) <= 4  # the header's page (and its neighbours at most)
    finally:
        f.mf.close()
