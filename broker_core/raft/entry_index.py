"""Where each Raft entry ends in the CommitLog, and its term: one fixed slot per entry.

The CommitLog holds the entries' bytes back to back (each entry: the records of one
append, an END-OF-FILE blank first when they start a new segment; a new leader's
no-op holds no bytes). This file says, for entry i, its term and the CommitLog
offset just past it, so entry i spans [end of i-1, end of i). DLedger keeps the
same in an index file beside its data; a record's own header has no room for a
term, and keeping the CommitLog's record format keeps every reader, tool and
replica of it unchanged.

    header  magic "FGRAFTIX", version, then base index, base term, base offset: the
            entries before it are not in this file (the CommitLog held records
            before the group ran Raft; they count as committed, ending at base offset)
    slot    term, end offset, CRC-32 of the two: written after the entry's bytes

A crash can leave a slot torn or pointing past the bytes that made it to disk: on
load a slot that fails its CRC, goes back in term or offset, is dropped with every
slot after it (the node then holds a shorter log, which Raft repairs from the
leader; nothing it acknowledged is among them: a slot is synced before its entry
is acknowledged, in sync flush mode).
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from pathlib import Path

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import atomic_write

MAGIC = b"FGRAFTIX"
VERSION = 1
HEADER = struct.Struct(">8sIIQQQ")  # magic, version, (pad), base index, base term, base offset
SLOT = struct.Struct(">QQI")  # term, end offset, crc32 of the first 16 bytes


class EntryIndex:
    def __init__(self, path: Path, base_offset: int = 0) -> None:
        """Open `path`, creating it (entries start after `base_offset`) when missing."""
        self.path = Path(path)
        if not self.path.exists():
            atomic_write(self.path, HEADER.pack(MAGIC, VERSION, 0, 0, 0, base_offset))
        self.terms, self.ends = array("Q"), array("Q")
        self.dropped = 0  # slots dropped on load (torn by a crash)
        self._fd = os.open(self.path, os.O_RDWR)
        try:
            self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _load(self) -> None:
        raw = os.pread(self._fd, HEADER.size, 0)
        if len(raw) < HEADER.size:
            raise StoreCorruptError(f"{self.path}: header cut short ({len(raw)} bytes)")
        magic, version, _pad, self.base_index, self.base_term, self.base_offset = \
            HEADER.unpack(raw)
        if magic != MAGIC or version != VERSION:
            raise StoreCorruptError(f"{self.path}: not a Raft entry index "
                                    f"(magic {magic!r}, version {version})")
        size = os.fstat(self._fd).st_size - HEADER.size
        data = os.pread(self._fd, size, HEADER.size)
        term, end = self.base_term, self.base_offset
        for at in range(0, len(data) - SLOT.size + 1, SLOT.size):
            t, e, crc = SLOT.unpack_from(data, at)
            if crc != zlib.crc32(data[at:at + 16]) or t < term or e < end or t == 0:
                break
            self.terms.append(t)
            self.ends.append(e)
            term, end = t, e
        kept = HEADER.size + len(self.ends) * SLOT.size
        if kept < HEADER.size + size:
            self.dropped = (HEADER.size + size - kept + SLOT.size - 1) // SLOT.size
            os.ftruncate(self._fd, kept)
            os.fsync(self._fd)

    # -- reading -------------------------------------------------------------------------
    def last_index(self) -> int:
        return self.base_index + len(self.ends)

    def term_at(self, index: int) -> int:
        """The term of entry `index`: the base's at the base, 0 past the last."""
        i = index - self.base_index
        if i == 0:
            return self.base_term
        if i < 0:
            raise LookupError(f"entry {index} is before this log's first ({self.base_index + 1})")
        return self.terms[i - 1] if i <= len(self.terms) else 0

    def end_of(self, index: int) -> int:
        """The CommitLog offset just past entry `index` (the base offset at the base)."""
        i = index - self.base_index
        if i < 0 or i > len(self.ends):
            raise LookupError(f"no entry {index} (this log holds {self.base_index + 1}-"
                              f"{self.last_index()})")
        return self.ends[i - 1] if i else self.base_offset

    def last_end(self) -> int:
        return self.ends[-1] if self.ends else self.base_offset

    def index_at(self, offset: int) -> int:
        """The last entry ending at or before `offset` (the base if none)."""
        lo, hi = 0, len(self.ends)
        while lo < hi:  # bisect over an array of ends, which never decrease
            mid = (lo + hi) // 2
            if self.ends[mid] <= offset:
                lo = mid + 1
            else:
                hi = mid
        return self.base_index + lo

    # -- writing -------------------------------------------------------------------------
    def append(self, term: int, end: int) -> None:
        if term < (self.terms[-1] if self.terms else self.base_term) or end < self.last_end():
            raise StoreCorruptError(f"entry of term {term} ending at {end} cannot follow "
                                    f"entry {self.last_index()}")
        head = struct.pack(">QQ", term, end)
        os.pwrite(self._fd, head + zlib.crc32(head).to_bytes(4, "big"),
                  HEADER.size + len(self.ends) * SLOT.size)
        self.terms.append(term)
        self.ends.append(end)

    def truncate(self, index: int) -> None:
        """Drop entries at and after `index`."""
        keep = max(0, index - 1 - self.base_index)
        del self.terms[keep:]
        del self.ends[keep:]
        os.ftruncate(self._fd, HEADER.size + keep * SLOT.size)

    def reset(self, base_index: int, base_term: int, base_offset: int) -> None:
        """Hold no entries, starting after `base_index` (a snapshot installed)."""
        atomic_write(self.path, HEADER.pack(MAGIC, VERSION, 0, base_index, base_term,
                                            base_offset))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR)
        self.base_index, self.base_term, self.base_offset = base_index, base_term, base_offset
        del self.terms[:]
        del self.ends[:]

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
