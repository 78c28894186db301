"""A transaction's output and its consumer group's offsets, committed together or not at
all: a child process commits three halves with offsets against a real store and is
SIGKILLed at every step (before the op record, after it, after each copy, before its
tables are saved); the store recovered and the op read back, the output is there
exactly once and the offsets moved, or neither."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker_core.protocol.transactions import HALF_TOPIC
from broker_core.server.group_state import OffsetTable
from broker_core.server.transactions import TxService
from broker_core.server.tx_table import TxTable
from broker_core.store import MessageStore, StoreConfig

CHILD = r"""
import os, signal, sys, time
from pathlib import Path
from broker_core import protocol as p
from broker_core.protocol.delay import PROP_REAL_QID, PROP_REAL_TOPIC
from broker_core.protocol.transactions import (HALF_TOPIC, PROP_TX_HALF, Consumed, TxState,
                                               fingerprint)
from broker_core.server.group_state import OffsetTable
from broker_core.server.queue_locks import QueueLocks
from broker_core.server.transactions import TxService
from broker_core.server.tx_table import TxTable, committed_copy_props
from broker_core.store import MessageStore, StoreConfig

root, crash = Path(sys.argv[1]), int(sys.argv[2])
store = MessageStore(root / "s", StoreConfig(
    commitlog_segment_bytes=64 * 1024, max_message_bytes=8 * 1024, background_services=False))
offsets, table = OffsetTable(root / "offsets.json"), TxTable(root / "tx.json")
locks = QueueLocks(time.monotonic, time.time)
copies = 0

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def put(topic, qid, m):
    global copies
    if copies == crash:
        die()
    copies += 1
    return store.put(topic, qid, m.body, m.tags, m.keys, committed_copy_props(m), wait=False,
                     born_timestamp=m.born_timestamp)

for i in range(5):
    store.put("in", 0, b"in%d" % i, wait=False)
for i in range(3):
    store.put(HALF_TOPIC, 0, b"out%d" % i, wait=False, properties={
        p.PRODUCER_GROUP: "g", PROP_TX_HALF: "true", PROP_REAL_TOPIC: "out",
        PROP_REAL_QID: "0"})
tx = TxService(store, table, put, lambda: int(time.time() * 1000), offsets=offsets,
               locks=locks)
tx.catch_up()
offsets.commit("g", "in", 0, 0)
offsets.save(), table.save()
locks.lock("g", "c", "in", [0])
last = fingerprint(store.get("in", 0, 4, 1).messages[0])
consumed = Consumed("g", "in", "c", {0: (0, 5, locks.epochs("g", "c", "in", [0])[0], last)})
assert tx.fence(consumed) is None
if crash < 0:
    die()
result = tx.end([0, 1, 2], TxState.COMMIT, "producer", consumed)
assert result.ok, result
die()  # before the tables are saved
"""


def recovered(root):
    store = MessageStore(root / "s", StoreConfig(
        commitlog_segment_bytes=64 * 1024, max_message_bytes=8 * 1024, background_services=False))
    offsets = OffsetTable(root / "offsets.json")

    def put(topic, qid, m):
        from broker_core.server.tx_table import committed_copy_props

        return store.put(topic, qid, m.body, m.tags, m.keys, committed_copy_props(m),
                         wait=False, born_timestamp=m.born_timestamp)

    tx = TxService(store, TxTable(root / "tx.json"), put, lambda: 0, offsets=offsets)
    tx.catch_up()
    return store, offsets, tx


@pytest.mark.parametrize("crash", [-1, 0, 1, 2, 3])
def test_output_and_offsets_commit_together_across_a_sigkill_at_every_step(tmp_path, crash):
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(crash)],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr
    store, offsets, tx = recovered(tmp_path)
    try:
        got = list(store.get("out", 0, 0, 10).messages)
        if crash < 0:  # killed before the op record: nothing of it anywhere
            assert got == [] and offsets.get("g", "in", 0) == 0
            assert sorted(tx.pending) == [0, 1, 2]
            return
        assert [m.body for m in got] == [b"out0", b"out1", b"out2"]  # each once, in order
        assert offsets.get("g", "in", 0) == 5
        assert tx.pending == {} and [tx.state_of(h) for h in (0, 1, 2)] == ["committed"] * 3
        assert tx.counters["finished_on_recovery_total"] == (crash < 3)
        assert tx.table.done == 1  # read back once: the next restart looks no further
        assert store.queue_offsets(HALF_TOPIC, 0) == (0, 3)
    finally:
        store.close()


def test_a_commit_of_messages_a_failover_cut_is_fenced(tmp_path):
    """The transform read offsets 0-1 on an old master; the new master holds other
    messages there (the old one's tail was never replicated): same offsets, another
    record, so the commit is refused though lock and offset agree."""
    import time

    from broker_core.protocol.transactions import Consumed, fingerprint
    from broker_core.server.queue_locks import QueueLocks
    from broker_core.server.tx_commits import fence_reason

    def store_at(name: str, host: str, bodies):
        s = MessageStore(tmp_path / name, StoreConfig(
            commitlog_segment_bytes=64 * 1024, max_message_bytes=8 * 1024,
            background_services=False, store_host=host))
        for b in bodies:
            s.put("in", 0, b, wait=False)
        return s

    # each master stamps what it stores with its own address (a slave keeps its master's)
    old, new = store_at("old", "10.0.0.1:10911", [b"a", b"b"]), \
        store_at("new", "10.0.0.2:10911", [b"a", b"c"])
    try:
        locks = QueueLocks(time.monotonic, time.time)
        locks.lock("g", "c", "in", [0])
        epoch = locks.epochs("g", "c", "in", [0])[0]
        offsets = OffsetTable(tmp_path / "offsets.json")
        read = fingerprint(old.get("in", 0, 1, 1).messages[0])
        consumed = Consumed("g", "in", "c", {0: (0, 2, epoch, read)})
        assert fence_reason(consumed, offsets, locks, old) is None
        assert "not the message c read there" in fence_reason(consumed, offsets, locks, new)
    finally:
        old.close()
        new.close()
