"""IndexService: the store's key index, a sequence of IndexFiles under ``index/``.

Every key of every message (the KEYS property, split on spaces) gets one
entry pointing at the record's physical offset. A file covers a time span: a
new one starts when the current is full or its first message is older than
``span_ms``. Files are named by the physical offset of their first entry.

Like the ConsumeQueues it is derived data, kept in step with the CommitLog:
* the put path, the replica path and crash recovery all `add` in CommitLog order;
* recovery cuts every entry at or after the offset it replays from
  (`truncate_from`), so no entry survives that points at a cut record;
* retention drops the files whose entries all point below the CommitLog's new
  min offset (`delete_below`, the same call the queues get);
* the checkpoint's flush makes the files durable (`flush`).
"""

from __future__ import annotations

import logging
import os
import threading

from broker_core.store.index_file import IndexFile, key_hash
from broker_core.store.mapped_file import file_name, parse_file_name

log = logging.getLogger(__name__)


def split_keys(keys) -> list[str]:
    """The keys a message is indexed under: KEYS is space-separated (a list also does)."""
    if not keys:
        return []
    if isinstance(keys, str):
        return keys.split()
    return [k for key in keys for k in str(key).split()]


class IndexService:
    def __init__(self, directory: str, slots: int, capacity: int, span_ms: int,
                 pending_dirs=None) -> None:
        self.pending_dirs = pending_dirs  # fsutil.PendingDirs: new files' names, at checkpoint
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.slots, self.capacity, self.span_ms = slots, capacity, span_ms
        self.files: tuple[IndexFile, ...] = ()  # oldest first; replaced whole
        self._lock = threading.Lock()  # file list changes (writers hold the put lock too)

    def load(self) -> None:
        found = []
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if name.endswith(".alloc"):  # an allocation cut short by a crash
                os.unlink(path)
            elif parse_file_name(name) is not None:
                found.append(name)
        files = []
        for name in sorted(found):
            path = os.path.join(self.directory, name)
            try:
                files.append(IndexFile.open(path))
            except (OSError, ValueError) as exc:  # derived data: rebuilt for what it covered
                log.warning("dropping unreadable index file %s: %s", path, exc)
                os.unlink(path)
        self.files = tuple(files)

    @property
    def entries(self) -> int:
        return sum(f.count for f in self.files)

    @property
    def end_phys(self) -> int:
        """Offset of the newest record indexed (0 with no entry)."""
        for f in reversed(self.files):
            if f.count:
                return f.end_phys
        return 0

    # -- writing (under the store's put lock, or during recovery) ---------------------
    def add(self, keys: list[str], phys: int, ts: int) -> None:
        """Index one record under each of ``keys`` (all in one file)."""
        f = self.files[-1] if self.files else None
        n = len(keys)
        if f is None or not f.room(n, ts) or ts - f.begin_ts >= self.span_ms:
            f = self._roll(phys, ts, n)
        for key in keys:
            f.add(key_hash(key), phys, ts)

    def _roll(self, phys: int, ts: int, n: int) -> IndexFile:
        path = os.path.join(self.directory, file_name(phys))
        # a file started here before (emptied by a truncate): start it afresh
        stale = [f for f in self.files if f.path == path]
        for f in stale:
            f.destroy()
        f = IndexFile.create(path, self.slots, max(self.capacity, n), phys, ts,
                             self.pending_dirs)
        with self._lock:
            self.files = tuple(x for x in self.files if x not in stale) + (f,)
        return f

    # -- reading ---------------------------------------------------------------------
    def lookup(self, key: str, begin_ms: int, end_ms: int, limit: int) -> list[tuple[int, int]]:
        """(phys, store ts ms) of entries whose key hashes like ``key``, newest first.
        Hash collisions are in it: the caller checks each record's keys."""
        h, out = key_hash(key), []
        for f in reversed(self.files):
            try:
                out.extend(f.lookup(h, begin_ms, end_ms, limit - len(out)))
            except ValueError:  # the file was removed by retention meanwhile
                continue
            if len(out) >= limit:
                break
        return out

    # -- recovery, retention, flush ----------------------------------------------------
    def truncate_from(self, phys: int) -> int:
        """Remove every entry pointing at or after ``phys``; returns how many went."""
        cut, keep = 0, []
        for f in self.files:
            if f.begin_phys >= phys:
                cut += f.count
                f.destroy()
                continue
            cut += f.truncate_from(phys)
            keep.append(f)
        with self._lock:
            self.files = tuple(keep)
        return cut

    def delete_below(self, min_phys: int) -> int:
        """Delete the files whose every entry points below ``min_phys``."""
        gone = [f for f in self.files if f.end_phys < min_phys]
        if gone:
            with self._lock:
                self.files = tuple(f for f in self.files if f not in gone)
            for f in gone:
                f.destroy()
        return len(gone)

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
