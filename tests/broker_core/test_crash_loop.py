"""The real crash loop: a child puts with flush="sync" and is SIGKILLed at random moments.

After every restart every acknowledged message must read back intact, at the
queue offset it was acknowledged with, and every queue must read back without
holes or corrupt records.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from broker_core.store import GetStatus, MessageStore, StoreConfig

CYCLES = 22


def body_for(cycle: int, thread: int, seq: int, size: int) -> bytes:
    seed = hashlib.sha256(f"{cycle}-{thread}-{seq}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def run_child(writer: str, path: str, cycle: int, kill_after: float) -> tuple[dict, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, writer, path, str(cycle), "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = proc.stdout.readline()
    assert ready.startswith("READY "), (ready, proc.stderr.read())
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    reader.join(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    # A line cut by the kill has no newline: it was never fully acknowledged.
    return json.loads(ready[6:]), [ln for ln in lines if ln.endswith("\n")]


def verify(path: str, acked: dict) -> dict:
    config = StoreConfig(
        commitlog_segment_bytes=64 * 1024,
        max_message_bytes=8 * 1024,
        consumequeue_units_per_file=256,
        background_services=False,
    )
    with MessageStore(path, config) as store:
        for (topic, qid, qo), (cycle, tid, seq, size) in acked.items():
            got = store.get(topic, qid, qo, max_msgs=1)
            assert got.status is GetStatus.FOUND, (topic, qid, qo, got.status)
            msg = got.messages[0]
            assert msg.queue_offset == qo
            assert msg.body == body_for(cycle, tid, seq, size), (topic, qid, qo)
        for topic, qid in store.queues():
            lo, hi = store.queue_offsets(topic, qid)
            offset = lo
            while offset < hi:
                got = store.get(topic, qid, offset, max_msgs=32)
                assert got.status is GetStatus.FOUND
                assert [m.queue_offset for m in got.messages] == list(
                    range(offset, offset + len(got.messages))
                ), "hole in a queue"
                offset = got.next_offset
        assert store.stats()["counters"]["corrupt_reads"] == 0
        return store.recovery.to_dict()


@pytest.mark.slow
def test_sigkill_crash_loop_keeps_every_acknowledged_message(tmp_path, writer_script):
    rng = random.Random(20261111)
    path = str(tmp_path / "store")
    acked: dict[tuple[str, int, int], tuple[int, int, int, int]] = {}
    crashes_seen = 0
    started = time.monotonic()
    for cycle in range(CYCLES):
        report, lines = run_child(writer_script, path, cycle, rng.uniform(0.05, 0.45))
        if cycle > 0:
            # The parent's verify() closed the store cleanly, so the child saw no crash.
            assert report["crashed"] is False
        new = 0
        for line in lines:
            _, topic, qid, qo, c, tid, seq, size = line.split()
            key = (topic, int(qid), int(qo))
            assert key not in acked, f"queue offset {key} acknowledged twice"
            acked[key] = (int(c), int(tid), int(seq), int(size))
            new += 1
        recovery = verify(path, acked)
        assert recovery["crashed"] is True  # the child never closed the store
        crashes_seen += 1
        assert recovery["recovered_to"] >= recovery["scanned_from"]
    assert crashes_seen == CYCLES
    assert len(acked) > CYCLES * 10, "the children barely wrote anything"
    assert time.monotonic() - started < 60
