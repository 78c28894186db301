"""Derived files' new names are made durable with the next checkpoint, not by the
thread that makes them (the broker's loop): what fsync_path sees, in order."""

from __future__ import annotations

import os

from broker_core import fsutil
from broker_core.store import MessageStore


def test_new_queue_and_index_dirs_are_fsynced_by_the_checkpoint_not_the_put(
        tmp_path, small_config, monkeypatch):
    store = MessageStore(tmp_path / "s", small_config())
    synced: list[str] = []
    real = fsutil.fsync_path
    monkeypatch.setattr(fsutil, "fsync_path", lambda p: (synced.append(os.fspath(p)),
                                                         real(p)))
    try:
        assert store.put("orders", 3, b"x", keys="k1").ok  # a new queue and an index file
        root = os.path.join(store.path, "consumequeue")
        assert not synced  # nothing on the putting thread
        store.cq_flush.run_once(force=True)
        queue_dir = os.path.join(root, "orders", "3")
        for d in (queue_dir, os.path.join(root, "orders"), root,
                  os.path.join(store.path, "index")):
            assert d in synced, (d, synced)
        assert synced.index(queue_dir) < synced.index(root)  # children before parents
        synced.clear()
        store.cq_flush.run_once(force=True)
        assert not [d for d in synced if d.startswith(root)]  # each once
    finally:
        store.close()
