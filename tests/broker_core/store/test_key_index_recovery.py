"""The key index after a crash: a writer SIGKILLed mid-write leaves an index that finds
every acknowledged message and holds no entry for a record recovery cut."""

from __future__ import annotations

import os
import random
import select
import signal
import threading
import time

from broker_core.store import MessageStore, StoreConfig
from broker_core.store.index_file import ENTRY, ENTRY_SIZE, HEADER_SIZE, key_hash

CONFIG = dict(commitlog_segment_bytes=64 * 1024, max_message_bytes=8 * 1024,
              consumequeue_units_per_file=256, index_slots=64, index_entries=300,
              cq_flush_interval_s=0.02, flush_interval_s=0.02)


def index_entries(store) -> list[tuple[int, int]]:
    """(key hash, phys) of every live entry of every index file."""
    out = []
    for f in store.index.files:
        at = HEADER_SIZE + f.slots * 4
        for n in range(f.count):
            h, phys, _diff, _prev = ENTRY.unpack_from(f.mm, at + n * ENTRY_SIZE)
            out.append((h, phys))
    return out


def assert_index_matches_log(store) -> int:
    """Every entry points at a record carrying a key of that hash; every key of every
    record has its entry. Returns the number of entries."""
    entries = index_entries(store)
    for h, phys in entries:
        msg = store.message_at(phys)  # raises if the entry outlived its record
        assert h in {key_hash(k) for k in msg.keys.split()}, (phys, msg.keys)
    expected = sum(len(m.keys.split()) for q in store.queues()
                   for m in store.get(*q, 0, 100_000).messages if m.keys)
    assert len(entries) == expected
    return len(entries)


def writer(path: str, cycle: int, out) -> None:
    store = MessageStore(path, StoreConfig(**CONFIG))
    out.write("READY\n")
    out.flush()
    lock = threading.Lock()

    def run(tid: int) -> None:
        rng = random.Random(cycle * 10 + tid)
        for seq in range(10**9):
            key = f"c{cycle}-t{tid}-{seq}"
            r = store.put("orders", seq % 3, os.urandom(rng.choice((10, 900, 3000))),
                          keys=[key, f"user-{seq % 5}"])
            assert r.ok
            with lock:
                out.write(f"ACK {key} {r.physical_offset}\n")
                out.flush()

    for t in range(3):
        threading.Thread(target=run, args=(t,), daemon=True).start()
    time.sleep(3600)


def crash_once(path: str, cycle: int, after: float) -> list[tuple[str, int]]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            writer(path, cycle, os.fdopen(w, "w"))
        finally:
            os._exit(4)
    os.close(w)
    stream = os.fdopen(r)
    assert select.select([r], [], [], 30)[0], "writer did not start"
    assert stream.readline() == "READY\n"
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    time.sleep(after)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    reader.join(5)
    stream.close()
    return [(p[1], int(p[2])) for p in (ln.split() for ln in lines if ln.endswith("\n"))]


def test_sigkill_mid_write_leaves_an_index_that_agrees_with_the_log(tmp_path):
    path = str(tmp_path / "store")
    acked: list[tuple[str, int]] = []
    rng = random.Random(7)
    replayed = 0
    for cycle in range(4):
        acked += crash_once(path, cycle, rng.uniform(0.2, 0.5))
        with MessageStore(path, StoreConfig(**CONFIG, background_services=False)) as store:
            assert store.recovery.crashed
            replayed += store.recovery.index_entries_removed
            n = assert_index_matches_log(store)
            assert n >= 2 * len(acked)
            assert len(store.index.files) > 1
            for key, phys in rng.sample(acked, min(200, len(acked))):
                assert [m.physical_offset for m in store.query_by_key(key).messages] == [phys]
    assert replayed > 0  # entries past the checkpoint were cut and rebuilt from the log


def test_no_stale_hit_after_recovery_cuts_a_torn_record(tmp_path, small_config):
    cfg = small_config(index_slots=8)
    store = MessageStore(tmp_path, cfg)
    for i in range(20):
        store.put("orders", 0, b"k" * 300, keys=f"kept-{i}")
    torn = store.put("orders", 0, b"t" * 300, keys="torn")
    seg = store.commitlog.segment_for(torn.physical_offset)
    at = torn.physical_offset - seg.start_offset + 100
    seg.mm[at : at + 8] = b"\xff" * 8  # a torn body: its CRC no longer matches
    store.commitlog.allocator.discard()
    store.commitlog.close()  # a crash: no close(), the abort file stays
    for cq in store.queue_table.all():
        cq.close()
    store.index.close()
    os.close(store._lock_fd)
    store._services.stop()

    with MessageStore(tmp_path, cfg) as store:
        assert store.recovery.recovered_to == torn.physical_offset
        assert store.recovery.index_entries_removed >= 1
        assert store.query_by_key("torn").messages == []
        reused = store.put("orders", 0, b"n" * 300, keys="new")
        assert reused.physical_offset == torn.physical_offset  # the same offset, a new life
        assert store.query_by_key("torn").messages == []
        assert [m.body[:1] for m in store.query_by_key("new").messages] == [b"n"]
        assert len(store.query_by_key("kept-19").messages) == 1
        assert assert_index_matches_log(store) == 21
