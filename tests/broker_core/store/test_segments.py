"""Segment files: background pre-allocation, warm-up and mlock, checkpoint, concurrent use."""

from __future__ import annotations

import os
import threading
import time

from broker_core.store import GetStatus, MessageStore, PutStatus
from broker_core.store.checkpoint import Checkpoint
from broker_core.store.mapped_file import MappedFile, file_name


def _wait_for(cond, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_next_segment_is_preallocated_in_the_background(tmp_path, small_config):
    seg = 64 * 1024
    with MessageStore(tmp_path, small_config()) as store:
        store.put("T", 0, b"x")
        nxt = tmp_path / "commitlog" / file_name(seg)
        assert _wait_for(nxt.exists), "segment 1 was not prepared ahead of need"
        assert nxt.stat().st_size == seg and nxt.stat().st_blocks * 512 >= seg  # really allocated
        while store.commitlog.write_offset < seg:
            store.put("T", 0, b"y" * 4000)
        assert _wait_for((tmp_path / "commitlog" / file_name(2 * seg)).exists)
    # Close drops the prepared, never-used segment: no empty files left behind.
    assert not (tmp_path / "commitlog" / file_name(2 * seg)).exists()


def test_warm_up_and_mlock(tmp_path, small_config):
    with MessageStore(tmp_path, small_config(warm_mapped_file=True, mlock=True)) as store:
        for _ in range(40):
            assert store.put("T", 0, b"w" * 4000).status is PutStatus.PUT_OK
        segs = store.commitlog.segments
        assert len(segs) >= 2
        assert all(isinstance(s.locked, bool) for s in segs)  # False (with a warning) if refused
        assert len(store.get("T", 0, 0, 100).messages) == 40


def test_mapped_file_refuses_to_clobber_and_leaves_no_partial_file(tmp_path):
    path = str(tmp_path / file_name(0))
    f = MappedFile(path, 0, 8192, create=True)
    f.mm[:5] = b"hello"
    f.close()
    try:
        MappedFile(path, 0, 8192, create=True)
        raise AssertionError("an existing segment was overwritten")
    except FileExistsError:
        pass
    again = MappedFile(path, 0, 0, create=False)
    assert again.size == 8192 and again.mm[:5] == b"hello"
    again.close()
    assert sorted(os.listdir(tmp_path)) == [file_name(0)]


def test_checkpoint_records_the_flushed_offset(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        r = store.put("T", 0, b"c" * 100)
        store.wait_flushed(r.end_offset)
        assert store.cq_flush.run_once() == r.end_offset
        cp = Checkpoint.load(str(tmp_path / "checkpoint"))
        assert cp.safe_offset == r.end_offset
    (tmp_path / "checkpoint").write_bytes(b"junk")
    assert Checkpoint.load(str(tmp_path / "checkpoint")) is None


def test_concurrent_puts_and_gets(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        errors: list[str] = []

        def producer(tid: int) -> None:
            for i in range(300):
                r = store.put("T", tid % 2, f"{tid}:{i}".encode() * 20)
                if r.status is not PutStatus.PUT_OK:
                    errors.append(str(r))

        def consumer(qid: int) -> None:
            offset = 0
            deadline = time.monotonic() + 20
            while offset < 600 and time.monotonic() < deadline:
                got = store.get("T", qid, offset, 50)
                if got.status is GetStatus.FOUND:
                    if [m.queue_offset for m in got.messages] != list(
                        range(offset, offset + len(got.messages))
                    ):
                        errors.append("out of order")
                    offset = got.next_offset
            if offset != 600:
                errors.append(f"consumer {qid} stopped at {offset}")

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
        threads += [threading.Thread(target=consumer, args=(q,)) for q in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.queue_offsets("T", 0) == (0, 600) == store.queue_offsets("T", 1)


def _vm_flags(path) -> list[set[str]]:
    """The VmFlags of this process's mappings of `path`, in address order (smaps: `rr`
    is MADV_RANDOM; a range advised apart is a mapping of its own)."""
    lines = open("/proc/self/smaps").read().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.endswith(" " + str(path)):
            for flags in lines[i + 1:]:
                if flags.startswith("VmFlags:"):
                    found.append(set(flags.split()[1:]))
                    break
    assert found, f"{path} is not mapped"
    return found


def test_the_segment_written_reads_no_ahead_and_gets_readahead_back_as_it_is_flushed(
        tmp_path, small_config, monkeypatch):
    """A write fault on the written segment must not run the disk's readahead (MiBs
    allocated inside a store); what is flushed, and the full segment before, stream to
    readers again (page by page a cold read was 65 MiB/s against 1-2 GiB/s)."""
    from broker_core.store import commitlog
    from broker_core.store.mapped_file import PAGE

    monkeypatch.setattr(commitlog, "READAHEAD_STEP", 4 * PAGE)  # 4 MiB in a real store
    seg = 64 * 1024
    first, second = tmp_path / "commitlog" / file_name(0), tmp_path / "commitlog" / file_name(seg)
    with MessageStore(tmp_path, small_config()) as store:
        store.put("T", 0, b"x")
        assert all("rr" in f for f in _vm_flags(first))
        while store.commitlog.write_offset < 6 * PAGE:
            store.put("T", 0, b"y" * 1000)
        store.commitlog.flush()
        written, rest = _vm_flags(first)  # split where the flushed pages end
        assert "rr" not in written and "rr" in rest
        while store.commitlog.write_offset < seg:
            store.put("T", 0, b"y" * 4000)
        assert all("rr" in f for f in _vm_flags(second))
        assert not any("rr" in f for f in _vm_flags(first))  # full: read ahead again
        store.put("T", 0, b"k", keys="order-1")  # the key index: hashed, read by page too
        assert all("rr" in f for f in _vm_flags(store.index.files[-1].mf.path))
