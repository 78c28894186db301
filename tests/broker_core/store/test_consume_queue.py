"""ConsumeQueue files cost disk for what they hold: sparse files allocated in
extents ahead of the units, growing past the first extent and across a file
roll, read back after a restart, and a full disk still answered DISK_FULL
before anything is stored."""

from __future__ import annotations

import os
from pathlib import Path

from broker_core.store import MessageStore, PutStatus
from broker_core.store.consume_queue import UNIT_SIZE
from broker_core.store.mapped_file import FIRST_EXTENT


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def test_many_queues_holding_little_take_little_disk(tmp_path, small_config):
    cfg = small_config(consumequeue_units_per_file=300_000)  # 6 MB files, as by default
    with MessageStore(tmp_path / "s", cfg) as store:
        for topic in range(50):
            for qid in range(4):
                assert store.put(f"t{topic}", qid, b"x").status is PutStatus.PUT_OK
        files = [p for p in (tmp_path / "s" / "consumequeue").rglob("*") if p.is_file()]
        assert len(files) == 200
        assert all(p.stat().st_size == 300_000 * UNIT_SIZE for p in files)  # sparse
        # one extent each (plus a block of slack per file for the filesystem's rounding)
        assert disk_bytes(tmp_path / "s" / "consumequeue") <= 200 * (FIRST_EXTENT + 4096)


def test_a_queue_grows_past_its_extents_and_across_a_roll_and_reads_back(tmp_path,
                                                                         small_config):
    cfg = small_config(consumequeue_units_per_file=2_000, max_message_bytes=1024)
    n = 5_000  # 2.5 files; the first extent holds 819 units
    with MessageStore(tmp_path / "s", cfg) as store:
        for i in range(n):
            assert store.put("T", 1, str(i).encode()).status is PutStatus.PUT_OK
        assert store.queue_offsets("T", 1) == (0, n)
    qdir = tmp_path / "s" / "consumequeue" / "T" / "1"
    assert len(os.listdir(qdir)) == 3
    with MessageStore(tmp_path / "s", cfg) as store:  # reopened: units found, not scanned
        assert store.queue_offsets("T", 1) == (0, n)
        got = []
        while len(got) < n:
            got += store.get("T", 1, len(got), max_msgs=500).messages
        assert [int(m.body) for m in got] == list(range(n))
        assert store.put("T", 1, b"after").status is PutStatus.PUT_OK  # reserved again
        assert store.get("T", 1, n).messages[0].body == b"after"


def test_new_queues_on_a_full_disk_are_refused_before_anything_is_stored(tmpfs,
                                                                       small_config):
    path = tmpfs(2 << 20)
    cfg = small_config(consumequeue_units_per_file=300_000, commitlog_segment_bytes=128 << 10)
    acked: dict[str, int] = {}
    with MessageStore(path, cfg) as store:
        for i in range(1000):  # each new queue needs an extent: the disk fills with them
            before = store.commitlog.write_offset
            r = store.put(f"q{i}", 0, b"m")
            if r.status is not PutStatus.PUT_OK:
                break
            acked[f"q{i}"] = r.queue_offset
        assert r.status is PutStatus.DISK_FULL, r
        assert store.commitlog.write_offset == before  # refused: nothing written
        assert len(acked) > 20
    with MessageStore(path, cfg) as store:
        for topic in acked:
            assert store.get(topic, 0, 0).messages[0].body == b"m"


def test_a_mapped_queue_file_keeps_no_descriptor_and_running_out_is_not_disk_full(
        tmp_path, small_config):
    """A mapped queue file holds no descriptor (10,000 queues must not be 10,000 of
    them); one is opened for the time of making or mapping it, so when the process has
    none left a put to a new queue is refused as SERVICE_NOT_AVAILABLE naming the
    cause, never DISK_FULL (an operator would go looking for disk space)."""
    import resource

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with MessageStore(tmp_path / "s", small_config()) as store:
        store.put("warm", 0, b"x")
        before = open_fds()
        for i in range(200):
            assert store.put(f"t{i}", 0, b"x").status is PutStatus.PUT_OK
        assert len(store.queue_table.mapped) >= 200  # all mapped,
        assert open_fds() - before <= 2  # and no descriptor each (room for the log)
        fillers = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(map(int, os.listdir("/proc/self/fd"))) + 1, hard))
        try:
            while True:  # take every descriptor left
                try:
                    fillers.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    break
            statuses = [store.put(f"more{i}", 0, b"x") for i in range(5)]
        finally:
            for fd in fillers:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        refused = [r for r in statuses if r.status is not PutStatus.PUT_OK]
        assert refused and all(r.status is PutStatus.SERVICE_NOT_AVAILABLE for r in refused)
        assert "Too many open files" in refused[0].reason
        assert store.put("more0", 0, b"y").status is PutStatus.PUT_OK  # serving again
        assert [m.body for m in store.get("t7", 0, 0).messages] == [b"x"]


def test_past_the_mapping_limit_the_least_recently_used_queues_are_unmapped(tmp_path,
                                                                           small_config):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    cfg = small_config(consumequeue_max_mapped=64)
    with MessageStore(tmp_path / "s", cfg) as store:
        before = open_fds()
        for i in range(300):
            assert store.put(f"t{i}", 0, f"first {i}".encode()).status is PutStatus.PUT_OK
        table = store.queue_table
        assert len(table.mapped) <= 64 and table.releases >= 236
        assert open_fds() - before <= 4  # no descriptor a mapping: the log's own
        hot = store.queue_table.queues[("t299", 0)]
        assert hot.files  # the most recent stay mapped
        # written again after being unmapped: mapped again, its units where they were
        assert store.put("t0", 0, b"second 0").status is PutStatus.PUT_OK
        assert [m.body for m in store.get("t0", 0, 0).messages] == [b"first 0", b"second 0"]
        for i in range(1, 300, 7):  # read after being unmapped
            assert store.get(f"t{i}", 0, 0).messages[0].body == f"first {i}".encode()
        store.put("t1", 0, b"evicts the extra mappings of the reads")
        assert len(table.mapped) <= 64
    with MessageStore(tmp_path / "s", cfg) as store:  # reopened within the limit
        assert len(store.queue_table.mapped) <= 64
        assert store.get("t150", 0, 0).messages[0].body == b"first 150"
        assert store.queue_offsets("t0", 0) == (0, 2)


def test_the_mapping_limit_is_checked(small_config):
    import pytest

    from broker_core.errors import StoreConfigError

    with pytest.raises(StoreConfigError, match="consumequeue_max_mapped"):
        small_config(consumequeue_max_mapped=10).validate()


def test_a_dropped_topic_loses_its_queue_files_and_a_crash_does_not_bring_them_back(
        tmp_path, small_config):
    """In a child that exits without closing the store (what a crash leaves): the drop
    wrote its checkpoint, so recovery replays nothing of the topic into new queues."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "s"
    script = textwrap.dedent(f"""
        import os
        from broker_core.store import MessageStore, StoreConfig
        store = MessageStore({str(path)!r}, StoreConfig(background_services=False,
                                                          commitlog_segment_bytes=8 << 20))
        for i in range(100):
            store.put("gone", i % 4, b"g")
            store.put("kept", i % 2, b"k")
        store.commitlog.flush()
        assert store.drop_topic("gone") == 4
        assert not os.path.exists({str(path / "consumequeue" / "gone")!r})
        store.get("kept", 0, 0)  # the store serves on
        os._exit(0)  # no close: the abort file stays, as after a crash
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert (path / "abort").exists()
    with MessageStore(path, small_config(commitlog_segment_bytes=8 << 20,
                                         consumequeue_units_per_file=300_000)) as store:
        assert store.recovery.crashed
        assert [q for q in store.queues() if q[0] == "gone"] == []
        assert store.queue_offsets("kept", 0) == (0, 50)
        assert [m.body for m in store.get("kept", 1, 0, 50).messages] == [b"k"] * 50
