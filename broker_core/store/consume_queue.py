"""ConsumeQueue: the per (topic, queue id) index into the CommitLog.

``consumequeue/<topic>/<queue_id>/`` holds files of fixed 20-byte units
(commitlog offset i64, size i32, tag hash i64), named by the byte offset of
their first unit. Queue offset ``n`` is unit ``n``. It is derived data: after
a crash, units beyond the checkpoint's safe offset are cut and rebuilt from
the CommitLog.

Files are sparse and allocated in extents ahead of the units (`MappedFile.reserve`,
in `ensure_capacity`, before the CommitLog is written): a queue costs disk for what
it holds, and a full disk still answers DISK_FULL before anything is stored.
"""

from __future__ import annotations

import bisect
import os
import shutil
import struct
import threading
from collections.abc import Callable

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import PendingDirs
from broker_core.store.mapped_file import MappedFile, file_name, parse_file_name

UNIT = struct.Struct(">qiq")
UNIT_SIZE = UNIT.size  # 20


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, units_per_file: int,
                 pending_dirs: PendingDirs | None = None,
                 mapped: Callable[[ConsumeQueue], None] | None = None) -> None:
        """`mapped(cq)`: told each time the queue's files are mapped (the table's LRU)."""
        self.topic = topic
        self.queue_id = queue_id
        self.directory = os.path.join(root, topic, str(queue_id))
        self._pending_dirs = pending_dirs
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory, exist_ok=True)
            if pending_dirs is not None:  # the new directories' names, with the checkpoint
                pending_dirs.add(root)
                pending_dirs.add(os.path.dirname(self.directory))
        self.file_bytes = units_per_file * UNIT_SIZE
        self.files: tuple[MappedFile, ...] = ()
        self._starts: tuple[int, ...] = ()
        self.max_offset = 0  # the next queue offset to be written
        self.min_offset = 0  # the first queue offset still readable
        self.flushed_offset = 0
        self._files_lock = threading.Lock()
        # Where appends go: the last file and its first and past-last unit indices.
        self._tail: tuple[MappedFile | None, int, int] = (None, 0, 0)
        self._mapped = mapped
        # (start, path, bytes allocated) of each file while unmapped
        self.released: tuple[tuple[int, str, int], ...] = ()
        self.last_phys = -1  # where the last unit points: an unmapped queue left uncut

    # -- loading ----------------------------------------------------------
    def load(self) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(".alloc"):  # an allocation cut short by a crash
                os.unlink(os.path.join(self.directory, name))
        names = sorted(
            (start, n)
            for n in os.listdir(self.directory)
            if (start := parse_file_name(n)) is not None
        )
        files = []
        for start, name in names:
            f = MappedFile(os.path.join(self.directory, name), start, 0, create=False,
                           growable=True)
            if files and files[-1].end_offset != start:
                for x in files + [f]:
                    x.close()
                raise StoreCorruptError(f"consume queue file {self.directory}/{name} leaves a gap")
            files.append(f)
        self._set_files(tuple(files))
        if files and self._mapped is not None:
            self._mapped(self)
        if files:
            self.min_offset = files[0].start_offset // UNIT_SIZE
            last = files[-1]
            used = len(last.mm[:last.data_end()].rstrip(b"\0"))
            units = -(-used // UNIT_SIZE)
            self.max_offset = last.start_offset // UNIT_SIZE + units
            if self.max_offset > self.min_offset:
                self.last_phys = self.unit(self.max_offset - 1)[0]
        self.flushed_offset = self.max_offset

    def _set_files(self, files: tuple[MappedFile, ...]) -> None:
        self.files = files
        self._starts = tuple(f.start_offset for f in files)
        self._set_tail()

    def _set_tail(self) -> None:
        """Appends go straight to the last file up to what it has allocated."""
        if self.files:
            last = self.files[-1]
            lo = last.start_offset // UNIT_SIZE
            self._tail = (last, lo, lo + last.allocated // UNIT_SIZE)
        else:
            self._tail = (None, 0, 0)

    # -- mapping on demand (the table closes the least recently used) --------
    def release(self) -> bool:
        """Unmap the files (their descriptors go): dirty pages stay in the page cache
        and the checkpoint's syncfs makes them durable (the table releases queues only
        past SYNCFS_ABOVE of them, when the checkpoint flushes the filesystem whole).
        A put or read maps them again. Call under the store's put lock."""
        with self._files_lock:
            if not self.files:
                return False
            self.released = tuple((f.start_offset, f.path, f.allocated) for f in self.files)
            files = self.files
            self._set_files(())
        for f in files:
            f.close()
        return True

    def _remap(self) -> None:
        with self._files_lock:
            if not self.released or self.files:
                return
            files = [MappedFile(path, start, 0, create=False, growable=True,
                                allocated=allocated)
                     for start, path, allocated in self.released]
            self.released = ()
            self._set_files(tuple(files))
        if self._mapped is not None:
            self._mapped(self)

    def _file_for(self, index: int) -> tuple[MappedFile, int] | None:
        if self.released:
            self._remap()
        pos = index * UNIT_SIZE
        files, starts = self.files, self._starts
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0 or i >= len(files) or pos >= files[i].end_offset:
            return None
        return files[i], pos - files[i].start_offset

    # -- writing (under the store's put lock, or during recovery) -------------
    def ensure_capacity(self, n: int) -> None:
        """Create and allocate what units [max_offset, max_offset + n) need (OSError if
        no space): called before the records are written, so ENOSPC stores nothing."""
        if self.max_offset + n <= self._tail[2]:
            return
        if self.released:
            self._remap()
            if self.max_offset + n <= self._tail[2]:
                return
        end = (self.max_offset + n) * UNIT_SIZE
        new = not self.files
        with self._files_lock:
            files = list(self.files)
            next_start = files[-1].end_offset if files else self.max_offset * UNIT_SIZE
            if not files:
                next_start -= next_start % self.file_bytes
            while next_start < end:
                path = os.path.join(self.directory, file_name(next_start))
                files.append(MappedFile(path, next_start, self.file_bytes, create=True,
                                        pending_dirs=self._pending_dirs, growable=True))
                next_start += self.file_bytes
                self._set_files(tuple(files))
            if len(files) == 1 and self.max_offset == 0:
                self.min_offset = files[0].start_offset // UNIT_SIZE
            pos = self.max_offset * UNIT_SIZE
            for f in files:  # the files the new units fall in, allocated up to them
                if f.end_offset > pos and f.start_offset < end:
                    f.reserve(min(end, f.end_offset) - f.start_offset)
            self._set_tail()
        if new and self.files and self._mapped is not None:
            self._mapped(self)

    def append_unit(self, phys: int, size: int, tag_hash: int) -> int:
        """Write the next unit (after ensure_capacity); returns its queue offset."""
        index = self.max_offset
        f, lo, hi = self._tail
        if not lo <= index < hi:
            self.put_unit(index, phys, size, tag_hash)
            return index
        UNIT.pack_into(f.mm, (index - lo) * UNIT_SIZE, phys, size, tag_hash)
        self.max_offset = index + 1
        self.last_phys = phys
        return index

    def put_unit(self, index: int, phys: int, size: int, tag_hash: int) -> None:
        found = self._file_for(index)
        if found is None or found[1] + UNIT_SIZE > found[0].allocated:
            if index >= self.max_offset:
                self.ensure_capacity(index + 1 - self.max_offset)
            else:  # below the end (recovery rewriting a unit): its extent, if not yet
                f = self._file_for(index)[0]
                with self._files_lock:
                    f.reserve(index * UNIT_SIZE - f.start_offset + UNIT_SIZE)
                    self._set_tail()
        f, local = self._file_for(index)
        UNIT.pack_into(f.mm, local, phys, size, tag_hash)
        if index >= self.max_offset:
            self.max_offset = index + 1
            self.last_phys = phys

    # -- reading ------------------------------------------------------------
    def unit(self, index: int) -> tuple[int, int, int]:
        f, local = self._file_for(index)
        return UNIT.unpack_from(f.mm, local)

    def units(self, start: int, limit: int):
        """Yield (queue_offset, phys, size, tag_hash) for up to ``limit`` units from ``start``."""
        end = min(self.max_offset, start + limit)
        index = start
        if self.released and index < end:
            self._remap()
        unpack = UNIT.unpack_from
        while index < end:
            found = self._file_for(index)
            if found is None:
                return
            f, local = found
            stop = min(end, index + (f.size - local) // UNIT_SIZE)
            try:
                for i in range(index, stop):
                    phys, size, th = unpack(f.mm, local)
                    yield i, phys, size, th
                    local += UNIT_SIZE
            except ValueError:  # unmapped meanwhile (retention, the LRU): read again
                return
            index = stop

    def _first_at_or_above(self, phys: int, lo: int) -> int:
        """Smallest queue offset in [lo, max) whose unit points at or above ``phys``."""
        hi = self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self.unit(mid)[0] < phys:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- recovery and retention -----------------------------------------------
    def truncate_from_phys(self, phys: int) -> int:
        """Remove units pointing at or beyond ``phys``; returns how many were removed."""
        if self.released:
            if self.last_phys < phys:
                return 0  # nothing to cut: left unmapped
            self._remap()
        if not self.files:
            return 0
        first = self.files[0].start_offset // UNIT_SIZE
        cut_at = self._first_at_or_above(phys, max(first, self.min_offset))
        removed = self.max_offset - cut_at
        with self._files_lock:
            keep = []
            for f in self.files:
                lo = f.start_offset // UNIT_SIZE
                if lo >= cut_at and keep:
                    f.destroy()
                    continue
                keep.append(f)
                hi = lo + f.size // UNIT_SIZE
                if lo < self.max_offset and cut_at < hi:
                    a = max(cut_at, lo) - lo
                    b = min(self.max_offset, hi) - lo
                    if b > a:
                        f.mm[a * UNIT_SIZE : b * UNIT_SIZE] = bytes((b - a) * UNIT_SIZE)
                        f.flush()
            self._set_files(tuple(keep))
        self.max_offset = self.flushed_offset = cut_at
        self.min_offset = min(self.min_offset, cut_at)
        self.last_phys = self.unit(cut_at - 1)[0] if cut_at > self.min_offset else -1
        return removed

    def delete_below(self, min_phys: int) -> int:
        """Drop whole files whose units all point below ``min_phys``; fix min_offset."""
        if self.released:
            if len(self.released) < 2:
                return 0  # nothing to delete; its min_offset is fixed once it is used
            self._remap()
        try:
            return self._delete_below(min_phys)
        except ValueError:  # unmapped meanwhile by the LRU: the next round
            return 0

    def _delete_below(self, min_phys: int) -> int:
        deleted = 0
        while len(self.files) > 1:
            f = self.files[0]
            last_index = f.end_offset // UNIT_SIZE - 1
            if last_index >= self.max_offset or self.unit(last_index)[0] >= min_phys:
                break
            with self._files_lock:
                self._set_files(self.files[1:])
            f.destroy()
            deleted += 1
        if self.files:
            lo = max(self.min_offset, self.files[0].start_offset // UNIT_SIZE)
            self.min_offset = self._first_at_or_above(min_phys, lo)
        return deleted

    def flush(self) -> None:
        top = self.max_offset
        if top <= self.flushed_offset:
            return
        lo = self.flushed_offset * UNIT_SIZE
        for f in self.files:
            if f.end_offset > lo and f.start_offset < top * UNIT_SIZE:
                try:
                    f.flush()
                except ValueError:  # unmapped meanwhile: the checkpoint's syncfs has it
                    return
        self.flushed_offset = top

    def close(self) -> None:
        for f in self.files:
            f.close()

    def drop(self) -> None:
        """Unmap and delete the queue's files (its topic was deleted). Call under the
        store's put lock; a flush or retention pass holding this object finds no files."""
        with self._files_lock:
            files, self.released = self.files, ()
            self._set_files(())
        for f in files:
            f.close()
        shutil.rmtree(self.directory, ignore_errors=True)
