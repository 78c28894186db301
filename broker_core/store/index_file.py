"""IndexFile: one file of the key index (RocketMQ's IndexFile: hash slots plus linked entries).

Layout (big-endian)::

    header 64 B   magic "FGIX" | version u16 | 0 u16 | slots u32 | capacity u32 |
                  count u32 | begin ts ms i64 | begin phys i64 | end ts ms i64 |
                  end phys i64 | zeros
    slots         slots x u32: number of the newest entry whose key hashes here (0: none)
    entries       capacity x 20 B: key hash u32 | phys i64 | ms after begin ts u32 |
                  number of the previous entry of the same slot u32 (0: end of chain)

Entries are numbered from 1 and appended in CommitLog order, so their physical
offsets never decrease: cutting everything at or after an offset is a binary
search, then the slots that pointed past the cut are walked back along their
chains. A key's hash only narrows the search: readers verify the record itself.

Writers (the store's put lock) write an entry, then its slot, then the header
count; a reader that sees a slot ahead of the count walks past it.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib

import numpy as np

from broker_core.store.mapped_file import MappedFile

MAGIC = b"FGIX"
VERSION = 1
HEADER = struct.Struct(">4sHHIIIqqqq")
HEADER_SIZE = 64
SLOT = struct.Struct(">I")
ENTRY = struct.Struct(">IqII")
ENTRY_SIZE = ENTRY.size  # 20
_COUNT_AT = 16  # byte offset of `count` in the header
_COUNT = struct.Struct(">I")
_ENDS = struct.Struct(">qq")  # end ts, end phys
_ENDS_AT = HEADER.size - _ENDS.size  # end ts ms then end phys close the packed header
# how far store times may run backwards (a wall clock stepped back) before a chain walk,
# newest to oldest, stops at the first entry older than the range asked for
CLOCK_SLACK_MS = 60_000
MAX_SPAN_MS = 0xFFFFFFFF  # an entry's time is u32 ms after the file's begin (49 days)


def key_hash(key: str) -> int:
    """Stable across processes and runs (Python's hash() is salted)."""
    return zlib.crc32(key.encode("utf-8"))


def file_bytes(slots: int, capacity: int) -> int:
    return HEADER_SIZE + slots * SLOT.size + capacity * ENTRY_SIZE


class IndexFile:
    def __init__(self, mf: MappedFile) -> None:
        self.mf = mf
        self.mm = mf.mm
        # slots are hashed and entries looked up by chain: a fault reads the page it
        # needs, not the disk's readahead (MiBs, allocated inside a store: commitlog.py)
        mf.advise(mmap.MADV_RANDOM)
        (magic, version, _z, self.slots, self.capacity, self.count, self.begin_ts,
         self.begin_phys, self.end_ts, self.end_phys) = HEADER.unpack_from(self.mm, 0)
        if magic != MAGIC or version != VERSION:
            raise ValueError(f"{mf.path}: not an index file")
        if mf.size != file_bytes(self.slots, self.capacity) or self.count > self.capacity:
            raise ValueError(f"{mf.path}: index header does not match the file's size")
        self._entries_at = HEADER_SIZE + self.slots * SLOT.size
        self.dirty = False

    @classmethod
    def create(cls, path: str, slots: int, capacity: int, first_phys: int,
               first_ts: int, pending_dirs=None) -> IndexFile:
        mf = MappedFile(path, first_phys, file_bytes(slots, capacity), create=True,
                        pending_dirs=pending_dirs)
        mf.advise(mmap.MADV_RANDOM)  # before the header's write: its fault read MiBs ahead
        HEADER.pack_into(mf.mm, 0, MAGIC, VERSION, 0, slots, capacity, 0, first_ts, first_phys,
                         first_ts, first_phys)
        return cls(mf)

    @classmethod
    def open(cls, path: str) -> IndexFile:
        mf = MappedFile(path, 0, 0, create=False)
        try:
            return cls(mf)
        except (ValueError, struct.error):
            mf.close()
            raise

    @property
    def path(self) -> str:
        return self.mf.path

    @property
    def full(self) -> bool:
        return self.count >= self.capacity

    def room(self, n: int, ts: int) -> bool:
        """Can n more entries stored at ``ts`` go here?"""
        return self.count + n <= self.capacity and 0 <= ts - self.begin_ts <= MAX_SPAN_MS

    # -- writing (under the store's put lock) ------------------------------------
    def add(self, h: int, phys: int, ts: int) -> None:
        """Append one entry (after `room`); newest first in its slot's chain."""
        mm = self.mm
        slot_at = HEADER_SIZE + (h % self.slots) * 4
        prev = SLOT.unpack_from(mm, slot_at)[0]
        n = self.count + 1
        if prev >= n:  # a slot left ahead of the count by a crash: not a real entry
            prev = self._walk_below(prev, n)
        ENTRY.pack_into(mm, self._entries_at + (n - 1) * ENTRY_SIZE, h, phys,
                        ts - self.begin_ts, prev)
        SLOT.pack_into(mm, slot_at, n)
        end_ts = ts if ts > self.end_ts else self.end_ts
        _ENDS.pack_into(mm, _ENDS_AT, end_ts, phys)
        _COUNT.pack_into(mm, _COUNT_AT, n)
        self.count, self.end_ts, self.end_phys = n, end_ts, phys
        self.dirty = True

    def _walk_below(self, n: int, limit: int) -> int:
        while n >= limit:
            n = ENTRY.unpack_from(self.mm, self._entries_at + (n - 1) * ENTRY_SIZE)[3]
        return n

    # -- reading --------------------------------------------------------------------
    def lookup(self, h: int, begin_ms: int, end_ms: int, limit: int) -> list[tuple[int, int]]:
        """(phys, store ts ms) of up to ``limit`` entries with hash ``h`` stored in
        [begin_ms, end_ms], newest first."""
        mm, count = self.mm, self.count
        if not count or end_ms < self.begin_ts or begin_ms > self.end_ts:
            return []
        n = SLOT.unpack_from(mm, HEADER_SIZE + (h % self.slots) * 4)[0]
        out: list[tuple[int, int]] = []
        base, at = self.begin_ts, self._entries_at - ENTRY_SIZE
        unpack = ENTRY.unpack_from
        steps = 0
        while n and len(out) < limit and steps <= count:
            eh, phys, diff, prev = unpack(mm, at + n * ENTRY_SIZE)
            steps += 1
            if n <= count and eh == h:
                ts = base + diff
                if ts < begin_ms - CLOCK_SLACK_MS:
                    break  # a chain runs newest to oldest: nothing older can match
                if begin_ms <= ts <= end_ms:
                    out.append((phys, ts))
            n = prev if prev < n else 0  # a chain only ever points back
        return out

    # -- recovery and retention ---------------------------------------------------
    def phys_of(self, n: int) -> int:
        return ENTRY.unpack_from(self.mm, self._entries_at + (n - 1) * ENTRY_SIZE)[1]

    def truncate_from(self, phys: int) -> int:
        """Drop every entry pointing at or after ``phys``; returns how many went."""
        lo, hi = 1, self.count + 1  # first entry number whose phys >= phys
        while lo < hi:
            mid = (lo + hi) // 2
            if self.phys_of(mid) < phys:
                lo = mid + 1
            else:
                hi = mid
        keep = lo - 1
        cut = self.count - keep
        if cut <= 0:
            return 0
        heads = np.frombuffer(self.mm, dtype=">u4", count=self.slots, offset=HEADER_SIZE)
        for s in np.flatnonzero(heads > keep):  # slots pointing into the cut
            SLOT.pack_into(self.mm, HEADER_SIZE + int(s) * 4,
                           self._walk_below(int(heads[s]), keep + 1))
        del heads  # an exported buffer would stop the mmap from closing
        a = self._entries_at + keep * ENTRY_SIZE
        b = self._entries_at + self.count * ENTRY_SIZE
        self.mm[a:b] = bytes(b - a)
        if keep:
            _eh, last_phys, diff, _p = ENTRY.unpack_from(self.mm, a - ENTRY_SIZE)
            self.end_ts, self.end_phys = self.begin_ts + diff, last_phys
        else:
            self.end_ts, self.end_phys = self.begin_ts, self.begin_phys
        _ENDS.pack_into(self.mm, _ENDS_AT, self.end_ts, self.end_phys)
        _COUNT.pack_into(self.mm, _COUNT_AT, keep)
        self.count = keep
        self.mf.flush()
        return cut

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self.mf.flush()

    def close(self) -> None:
        self.mf.close()

    def destroy(self) -> None:
        self.mf.destroy()

    def __repr__(self) -> str:
        return (f"IndexFile({os.path.basename(self.path)}, {self.count}/{self.capacity}, "
                f"phys {self.begin_phys}..{self.end_phys})")
