"""Real stores for Raft tests: a node's CommitLog storage in a directory, entries of
real records placed where its log ends, reopened as after a crash."""

from __future__ import annotations

from pathlib import Path

from broker_core.protocol.record import BLANK, BLANK_MAGIC, HEADER, pack_host, prepare
from broker_core.raft.commitlog_storage import CommitLogStorage
from broker_core.raft.entry_bytes import EntryBuilder
from broker_core.store import MessageStore, StoreConfig

SEGMENT = 64 << 10  # small segments (the least the largest record allows): entries cross them
HOST = pack_host("127.0.0.1:10911")
TOPIC = "orders"


def config(**kw) -> StoreConfig:
    kw.setdefault("commitlog_segment_bytes", SEGMENT)
    kw.setdefault("max_message_bytes", 4 << 10)
    return StoreConfig(**kw)


def open_storage(path: Path, sync: bool = False, **kw) -> CommitLogStorage:
    store = MessageStore(path / "store", config(flush="sync" if sync else "async"))
    return CommitLogStorage(store, path / "raft", sync=sync, **kw)


def reopen(storage: CommitLogStorage, **kw) -> CommitLogStorage:
    path = storage.dir.parent
    close(storage)
    return open_storage(path, storage.sync, **kw)


def close(storage: CommitLogStorage) -> None:
    storage.close()
    storage.store.close()


def entry(storage: CommitLogStorage, bodies: list[bytes], queue_id: int = 0) -> bytes:
    """One entry's data: `bodies` as records of `TOPIC`'s queue, after what the
    storage's log and queue already hold (a leader's next queue offset)."""
    builder = EntryBuilder(storage.end_offset(), storage.segment_bytes)
    prepared = [prepare(TOPIC, queue_id, b, None, None, None, 4 << 10) for b in bodies]
    builder.add(prepared, queue_id, next_queue_offset(storage, queue_id), 1, 2, HOST)
    return builder.data()


def next_queue_offset(storage: CommitLogStorage, queue_id: int) -> int:
    """What the queue shows readers and the records of it in entries not published
    yet: a leader's counter."""
    n = storage.store.queue_offsets(TOPIC, queue_id)[1]
    first = storage.index.index_at(storage.commitlog.write_offset) + 1
    for e in storage.entries(first, storage.last_index()):
        pos = 0
        while pos < len(e.data):
            size, magic = BLANK.unpack_from(e.data, pos)
            if magic != BLANK_MAGIC and HEADER.unpack_from(e.data, pos)[3] == queue_id:
                n += 1
            pos += size
    return n


def bodies(storage: CommitLogStorage, queue_id: int = 0) -> list[bytes]:
    """What a reader of the queue sees."""
    got = storage.store.get(TOPIC, queue_id, 0, 10_000)
    return [m.body for m in got.messages]
