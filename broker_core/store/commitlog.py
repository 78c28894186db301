"""The CommitLog: every topic's messages appended to one sequence of segments.

Physical offsets are global byte offsets; a segment file is named by the
offset of its first byte. A record that does not fit at a segment's tail
leaves an END-OF-FILE blank and goes to the start of the next segment, so a
record never spans two files. ``write_offset`` only ever points just past a
complete record, and ``flushed_offset`` only past durable ones; these two
numbers are what the flush services, the checkpoint and recovery share.
"""

from __future__ import annotations

import bisect
import mmap
import os
import threading

from broker_core.errors import StoreCorruptError
from broker_core.protocol.record import (
    BLANK,
    BLANK_MAGIC,
    BLANK_MIN,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC,
    Message,
    decode_record,
    encode_records,
)
from broker_core.store.allocate import SegmentAllocator
from broker_core.store.mapped_file import PAGE, MappedFile, parse_file_name

_CHUNK = 1 << 20
READAHEAD_STEP = 4 << 20  # the written part of the segment gets readahead back this often
_COPY_ONCE_ABOVE = 1024  # body bytes from which three copies beat one concatenation


class CommitLog:
    def __init__(self, directory: str, allocator: SegmentAllocator) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.allocator = allocator
        # Replaced whole (never mutated in place) so readers can iterate a snapshot.
        self.segments: tuple[MappedFile, ...] = ()
        self._starts: tuple[int, ...] = ()
        self.write_offset = 0
        self.flushed_offset = 0
        self.active: MappedFile | None = None  # the segment holding write_offset, if any
        self._writing: MappedFile | None = None  # the segment advised for writes (below)
        self._readahead_to = 0  # ... and how much of it has readahead back (bytes into it)
        self._segments_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        # rung as the log grows and as more of it is durable: the services that wait
        # for those (flush, checkpoint, disk check) sleep until then (store.flush)
        self._bells: dict[str, threading.Event] = {"grew": threading.Event(),
                                                   "flushed": threading.Event()}
        self._grew = self._bells["grew"]
        self._flushed = self._bells["flushed"]

    def bell(self, kind: str) -> threading.Event:
        """The event rung when the log `grew` or more of it was `flushed`."""
        return self._bells[kind]

    # -- loading ----------------------------------------------------------
    def load(self) -> None:
        found = []
        for name in os.listdir(self.directory):
            if name.endswith(".alloc"):  # an allocation cut short by a crash
                os.unlink(os.path.join(self.directory, name))
            start = parse_file_name(name)
            if start is not None:
                found.append((start, name))
        segs = []
        for start, name in sorted(found):
            seg = MappedFile(os.path.join(self.directory, name), start, 0, create=False)
            if segs and segs[-1].end_offset != start:
                for s in segs + [seg]:
                    s.close()
                raise StoreCorruptError(
                    f"commitlog segment {name} does not follow the previous one "
                    f"(expected start {segs[-1].end_offset})"
                )
            segs.append(seg)
        self.write_offset = self.flushed_offset = segs[0].start_offset if segs else 0
        self._set_segments(tuple(segs))

    def _set_segments(self, segs: tuple[MappedFile, ...]) -> None:
        self.segments = segs
        self._starts = tuple(s.start_offset for s in segs)
        self._find_active()

    def _find_active(self) -> None:
        segs = self.segments
        if segs and segs[-1].start_offset <= self.write_offset < segs[-1].end_offset:
            self.active = segs[-1]
        else:
            self.active = None

    # -- offsets ----------------------------------------------------------
    @property
    def min_offset(self) -> int:
        segs = self.segments
        return segs[0].start_offset if segs else self.write_offset

    def segment_for(self, offset: int) -> MappedFile | None:
        segs, starts = self.segments, self._starts
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or i >= len(segs):
            return None
        seg = segs[i]
        return seg if offset < seg.end_offset else None

    # -- writing (caller holds the store's put lock) -------------------------
    def fits(self, size: int) -> bool:
        """Whether a record of ``size`` bytes goes into the active segment at write_offset."""
        seg = self.active
        return seg is not None and self.write_offset + size + BLANK_MIN <= seg.end_offset

    def roll(self) -> MappedFile:
        """Close the active segment with an END-OF-FILE blank and start the next one.

        Raises OSError (ENOSPC) before anything is written if the new segment
        cannot be created.
        """
        offset = self.write_offset
        seg = self.active
        start = seg.end_offset if seg is not None else offset
        new = self.allocator.take(start)
        if seg is not None:
            local = offset - seg.start_offset
            BLANK.pack_into(seg.mm, local, seg.size - local, BLANK_MAGIC)
        self.write_offset = start
        with self._segments_lock:
            self._set_segments(self.segments + (new,))
        self.allocator.prepare(start + self.allocator.size)
        return new

    def _write_into(self, seg: MappedFile) -> None:
        """Writes go into `seg` now: its faults read no ahead; the segment before it,
        full, gets the kernel's readahead back for readers streaming it.

        A write fault on a file mapping runs the file's readahead (read_ahead_kb: 8 MiB
        on this VM's disk) at each readahead mark: MiBs of page cache allocated inside
        one store, 1-2 ms in a quiet process and 20 ms in `make demo`, on the master
        and its slave at the same offsets (a fault-free master's SLOW at the first
        segment's 6 MiB). What is written gets readahead back as it is flushed
        (`_readahead_written`): a consumer catching up from disk streams it."""
        if self._writing is not None:
            self._writing.advise(mmap.MADV_NORMAL)
        seg.advise(mmap.MADV_RANDOM)
        self._writing, self._readahead_to = seg, 0

    def _readahead_written(self, upto: int) -> None:
        """Readahead back for the segment being written below `upto` (flushed), in
        steps of READAHEAD_STEP: read page by page, a cold 64 MiB came at 65 MiB/s
        against 1.1-2.2 GiB/s read ahead (this VM)."""
        seg, done = self._writing, self._readahead_to
        if seg is None:
            return
        end = min(upto, seg.end_offset) - seg.start_offset
        end -= end % PAGE
        if end - done >= READAHEAD_STEP:
            seg.advise(mmap.MADV_NORMAL, end)
            if self._writing is seg:  # (the put path may have moved on meanwhile)
                self._readahead_to = end

    def write_records(self, prepared, queue_id: int, first_queue_offset: int, born_ms: int,
                      store_ms: int, host: bytes) -> int:
        """Write prepared records (`message.prepare`) as one block at write_offset, in
        the active segment (the caller made sure they fit: `fits`, else `roll`);
        returns the first one's physical offset. write_offset does not move: the
        caller writes the records' queue units, then `commit`s (the checkpoint may
        count a record durable as soon as write_offset passes it)."""
        seg = self.active
        if seg is not self._writing:
            self._write_into(seg)
        first = self.write_offset
        local = first - seg.start_offset
        mm = seg.mm
        if len(prepared) == 1:
            size, crc, body, suffix, _th = prepared[0]
            header = HEADER.pack(size, MESSAGE_MAGIC, crc, queue_id, 0, first_queue_offset,
                                 first, 0, born_ms, host, store_ms, host, 0, 0, len(body))
            if len(body) < _COPY_ONCE_ABOVE:
                mm[local : local + size] = b"".join((header, body, suffix))
            else:  # big body: copy it once, straight into the mapping
                at = local + HEADER_SIZE + len(body)
                mm[local : local + HEADER_SIZE] = header
                mm[local + HEADER_SIZE : at] = body
                mm[at : local + size] = suffix
        else:
            block = encode_records(prepared, queue_id, first_queue_offset, first, born_ms,
                                   store_ms, host)
            mm[local : local + len(block)] = block
        seg.max_store_timestamp = store_ms
        return first

    def commit(self, end: int) -> None:
        """Records below ``end`` are complete, their queue units written."""
        self.write_offset = end
        if not self._grew.is_set():
            self._grew.set()

    def write_at(self, offset: int, data: bytes | memoryview) -> int:
        """Replica path: copy a master's bytes to the same offsets, adding the segments
        they reach; returns the offset past them (write_offset does not move)."""
        pos, view = offset, memoryview(data)
        while view:
            seg = self.segment_for(pos)
            if seg is None:
                seg = self.add_segment(pos - pos % self.allocator.size)
            if seg is not self._writing:
                self._write_into(seg)
            local = pos - seg.start_offset
            n = min(len(view), seg.size - local)
            seg.mm[local:local + n] = view[:n]
            pos += n
            view = view[n:]
        return pos

    def add_segment(self, start: int) -> MappedFile:
        """Replica path: the segment starting at ``start`` joins the log (a slave mirrors
        its master's segments). It must follow the last one, or be the first."""
        segs = self.segments
        if segs and segs[-1].end_offset != start:
            raise StoreCorruptError(
                f"replicated segment at {start} does not follow the last one "
                f"(ending at {segs[-1].end_offset})")
        new = self.allocator.take(start)
        if not segs:
            self.write_offset = self.flushed_offset = start
        with self._segments_lock:
            self._set_segments(self.segments + (new,))
        return new

    def begin_at(self, start: int) -> None:
        """Replica path: this empty log begins at segment boundary ``start`` (it joins a
        group whose older bytes retention removed)."""
        if self.write_offset or any(_last_nonzero(s.mm, 0, s.size) for s in self.segments):
            raise StoreCorruptError(f"the log holds bytes: it cannot begin at {start}")
        with self._segments_lock:
            old = self.segments
            self._set_segments(())
        self._writing = None
        for seg in old:
            seg.destroy()
        self.add_segment(start)

    def advance(self, offset: int) -> None:
        """Replica path: records below ``offset`` are complete (their queue units written)."""
        self.write_offset = offset
        self._find_active()
        if not self._grew.is_set():
            self._grew.set()

    # -- flushing -----------------------------------------------------------
    def flush(self) -> int:
        """fdatasync every segment holding unflushed data; returns the new flushed offset."""
        with self._flush_lock:
            target = self.write_offset
            flushed = self.flushed_offset
            if target > flushed:
                for seg in self.segments:
                    if seg.end_offset > flushed and seg.start_offset < target:
                        seg.flush()
                self.flushed_offset = target
                self._readahead_written(target)
                if not self._flushed.is_set():
                    self._flushed.set()
            return self.flushed_offset

    # -- reading ------------------------------------------------------------
    def read(self, offset: int, size: int) -> bytes | None:
        seg = self.segment_for(offset)
        if seg is None:
            return None
        local = offset - seg.start_offset
        try:
            return seg.mm[local : local + size]
        except ValueError:  # the segment was removed by retention meanwhile
            return None

    def read_message(self, offset: int, size: int) -> Message:
        """Decode the record at ``offset``; raises CorruptRecord if it does not verify."""
        raw = self.read(offset, size)
        if raw is None:
            raise LookupError(offset)
        return decode_record(raw, 0, offset, len(raw))

    # -- recovery and retention ---------------------------------------------
    def truncate(self, end: int) -> int:
        """Cut everything at and after ``end``; returns how many non-zero bytes were cut."""
        cut = 0
        keep = []
        for seg in self.segments:
            if seg.start_offset > end:
                cut += _last_nonzero(seg.mm, 0, seg.size)
                seg.destroy()
                continue
            keep.append(seg)
            if seg.start_offset <= end < seg.end_offset:
                local = end - seg.start_offset
                last = _last_nonzero(seg.mm, local, seg.size)
                if last > local:
                    cut += last - local
                    for p in range(local, last, _CHUNK):
                        n = min(_CHUNK, last - p)
                        seg.mm[p : p + n] = bytes(n)
                    seg.flush()
        self.write_offset = self.flushed_offset = end
        with self._segments_lock:
            self._set_segments(tuple(keep))
        return cut

    def delete_oldest(self) -> MappedFile | None:
        """Remove the oldest segment unless it is the last one (the one being written)."""
        with self._segments_lock:
            segs = self.segments
            if len(segs) <= 1 or segs[0].end_offset > self.write_offset:
                return None
            self._set_segments(segs[1:])
        segs[0].destroy()
        return segs[0]

    def close(self) -> None:
        for seg in self.segments:
            seg.close()


def _last_nonzero(mm, lo: int, hi: int) -> int:
    """Index just past the last non-zero byte in mm[lo:hi], or lo if all zero."""
    p = hi
    while p > lo:
        q = max(lo, p - _CHUNK)
        stripped = mm[q:p].rstrip(b"\0")
        if stripped:
            return q + len(stripped)
        p = q
    return lo
