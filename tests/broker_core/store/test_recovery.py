"""Recovery after a crash: torn tails and flipped bytes are cut, never served; queues follow."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from broker_core.protocol.record import BLANK_MAGIC, HEADER_SIZE, MESSAGE_MAGIC
from broker_core.store import GetStatus, MessageStore, PutStatus


def body_for(cycle: int, thread: int, seq: int, size: int) -> bytes:
    seed = hashlib.sha256(f"{cycle}-{thread}-{seq}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def crash_after(writer: str, path: str, acks: int, flush: str = "sync") -> list[tuple]:
    """Run the writer child for ``acks`` puts; it exits without closing (a crash)."""
    env = dict(os.environ, FLOODGATE_TEST_FLUSH=flush)
    proc = subprocess.run(
        [sys.executable, writer, path, "0", "1", "--exit-after", str(acks)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = []
    for line in proc.stdout.splitlines()[1:]:
        _, topic, qid, qo, c, tid, seq, size = line.split()
        out.append((topic, int(qid), int(qo), body_for(int(c), int(tid), int(seq), int(size))))
    assert len(out) == acks
    return out


def records(path: str) -> list[tuple[str, int, int]]:
    """(segment file, position, size) of every record, in log order."""
    seg_dir = os.path.join(path, "commitlog")
    found = []
    for name in sorted(os.listdir(seg_dir)):
        raw = open(os.path.join(seg_dir, name), "rb").read()
        pos = 0
        while pos + 8 <= len(raw):
            size = int.from_bytes(raw[pos : pos + 4], "big")
            magic = int.from_bytes(raw[pos + 4 : pos + 8], "big")
            if size == 0 or magic == BLANK_MAGIC:
                break
            assert magic == MESSAGE_MAGIC
            found.append((os.path.join(seg_dir, name), pos, size))
            pos += size
    return found


def patch(file: str, pos: int, data: bytes) -> None:
    with open(file, "r+b") as f:
        f.seek(pos)
        f.write(data)


def readable(store, acked) -> list[bool]:
    out = []
    for topic, qid, qo, body in acked:
        got = store.get(topic, qid, qo, max_msgs=1)
        out.append(
            got.status is GetStatus.FOUND
            and got.messages[0].queue_offset == qo
            and got.messages[0].body == body
        )
    return out


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_torn_tail_is_cut_at_the_last_good_record(tmp_path, writer_script, small_config, flush):
    path = str(tmp_path)
    acked = crash_after(writer_script, path, 30, flush)
    recs = records(path)
    assert len(recs) == 30
    file, pos, size = recs[-1]
    keep = HEADER_SIZE // 2  # the write stopped in the middle of the header
    patch(file, pos + keep, bytes(size - keep))
    with MessageStore(path, small_config()) as store:
        rep = store.recovery
        assert rep.crashed and rep.truncated_bytes == keep
        assert "corrupt" in rep.stop_reason
        assert readable(store, acked) == [True] * 29 + [False]
        topic, qid, qo, _ = acked[-1]
        assert store.queue_offsets(topic, qid)[1] == qo  # its queue unit went too
        r = store.put(topic, qid, b"after")  # the queue continues where the log ends
        assert r.status is PutStatus.PUT_OK and r.queue_offset == qo
        assert r.physical_offset == rep.recovered_to
    with MessageStore(path, small_config()) as store:
        assert store.recovery.truncated_bytes == 0 and not store.recovery.crashed
        assert store.get(topic, qid, qo, 1).messages[0].body == b"after"


def test_flipped_byte_in_the_tail_cuts_from_that_record(tmp_path, writer_script, small_config):
    path = str(tmp_path)
    acked = crash_after(writer_script, path, 30)
    recs = records(path)
    file, pos, size = recs[-3]
    with open(file, "rb") as f:
        f.seek(pos + size - 1)
        last = f.read(1)
    patch(file, pos + HEADER_SIZE, b"\xff")  # first body byte (bodies here are never 0xff-led)
    with MessageStore(path, small_config()) as store:
        rep = store.recovery
        assert "CRC" in rep.stop_reason or "corrupt" in rep.stop_reason
        cut_expected = sum(r[2] for r in recs[-3:])
        assert rep.truncated_bytes <= cut_expected and rep.truncated_bytes > size - 1 - (
            last == b"\0"
        )
        assert readable(store, acked) == [True] * 27 + [False] * 3
        assert store.stats()["counters"]["corrupt_reads"] == 0


def test_flipped_byte_below_the_checkpoint_is_never_served(tmp_path, small_config):
    cfg = small_config()
    with MessageStore(tmp_path, cfg) as store:
        sent = [store.put("T", 0, bytes([65 + i % 26]) * 2000) for i in range(100)]
    victim = sent[10]
    seg = os.path.join(tmp_path, "commitlog", f"{0:020d}")
    patch(seg, victim.physical_offset + HEADER_SIZE + 5, b"\x00")
    with MessageStore(tmp_path, cfg) as store:
        assert store.recovery.records_replayed == 0  # clean: nothing rescanned
        got = store.get("T", 0, 0, max_msgs=100)
        offsets = [m.queue_offset for m in got.messages]
        assert 10 not in offsets and len(offsets) == 99
        assert store.stats()["counters"]["corrupt_reads"] == 1
        only = store.get("T", 0, 10, max_msgs=1)
        assert [m.queue_offset for m in only.messages] == [11]


def test_bad_checkpoint_means_a_full_rescan_with_the_same_result(tmp_path, small_config):
    cfg = small_config()
    with MessageStore(tmp_path, cfg) as store:
        for i in range(300):
            store.put(f"T{i % 2}", i % 3, str(i).encode() * 50, tags="x" if i % 2 else None)
        before = {q: store.queue_offsets(*q) for q in store.queues()}
    patch(os.path.join(tmp_path, "checkpoint"), 10, b"\x13\x37")
    with MessageStore(tmp_path, cfg) as store:
        assert store.recovery.scanned_from == 0
        assert store.recovery.records_replayed == 300
        assert {q: store.queue_offsets(*q) for q in store.queues()} == before
        got = store.get("T1", 1, 0, max_msgs=100, tag="x")
        assert got.status is GetStatus.FOUND and all(m.tags == "x" for m in got.messages)


def test_clean_restart_scans_nothing(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        for _ in range(200):
            store.put("T", 0, b"m" * 900)
        end = store.commitlog.write_offset
    with MessageStore(tmp_path, small_config()) as store:
        rep = store.recovery
        assert not rep.crashed and rep.scanned_from == rep.recovered_to == end
        assert rep.records_replayed == 0 and rep.truncated_bytes == 0


def test_a_record_that_names_another_queue_is_not_served(tmp_path, small_config):
    with MessageStore(tmp_path, small_config()) as store:
        sent = [store.put("T", 0, b"q" * 100) for _ in range(5)]
    seg = os.path.join(tmp_path, "commitlog", f"{0:020d}")
    patch(seg, sent[2].physical_offset + 15, b"\x07")  # queue id 0 -> 7; body CRC still fine
    with MessageStore(tmp_path, small_config()) as store:
        got = store.get("T", 0, 0, max_msgs=10)
        assert [m.queue_offset for m in got.messages] == [0, 1, 3, 4]
        assert store.stats()["counters"]["corrupt_reads"] == 1
