"""How far a raft member's readers saw, kept across a restart (raft.stream_group).

The mark lags the truth (saved about once a second and on close), never leads it: a
member shows readers only what its leader said a majority holds. On start, records
past it leave the queues (their bytes stay) until a leader says again that they are
committed; the store's own recovery has by then cut a torn record.

    mark = PublishedMark(raft_dir / "published.json")
    tail = reopen(store.replica_log(), mark)   # the end of the last whole record held
    ...
    mark.save(store.commitlog.write_offset)
"""

from __future__ import annotations

import json
from pathlib import Path

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import atomic_write


class PublishedMark:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> int:
        try:
            return int(json.loads(self.path.read_text())["offset"])
        except FileNotFoundError:
            return 0
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreCorruptError(f"{self.path}: unreadable ({exc})") from None

    def save(self, offset: int) -> None:
        atomic_write(self.path, json.dumps({"offset": offset}).encode())


def reopen(replica, mark: PublishedMark) -> int:
    """Withdraw what is not known committed from readers; the log's end (past its last
    whole record: a leader sends the rest again from there)."""
    replica.withdraw(mark.load())
    return max(replica.received, replica.offset)
