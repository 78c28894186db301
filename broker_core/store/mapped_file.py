"""One fixed-size, mmap'd file of the CommitLog or a ConsumeQueue (RocketMQ's MappedFile).

Files are named by the 20-digit zero-padded offset of their first byte. A
CommitLog segment is fully allocated when created (posix_fallocate), so a full
disk shows up as ENOSPC at creation time, never as SIGBUS in the middle of a
write through the mapping. A growable file (a ConsumeQueue's) is as long but
sparse: it is allocated in extents ahead of the writes (`reserve`), each extent
before anything that needs it is written, so the same holds at a fraction of
the disk: a queue holding a few units takes one small extent, not 6 MB
(the Taobao talk: one host, tens of thousands of queues), and it is mapped through libc
(libc_map.RawMapping) so that it holds no descriptor. Durability goes through fdatasync on the file descriptor, which
on Linux writes back pages dirtied through the mapping and, unlike
mmap.flush, releases the GIL while the disk works.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os

from broker_core.fsutil import fsync_path
from broker_core.store.libc_map import (
    CLOSED,
    RawMapping,
    mlock_python_mmap,
    msync_python_mmap,
)

log = logging.getLogger(__name__)

PAGE = mmap.PAGESIZE
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
NAME_DIGITS = 20


def file_name(start_offset: int) -> str:
    return f"{start_offset:0{NAME_DIGITS}d}"


def parse_file_name(name: str) -> int | None:
    """Start offset of a segment file name, or None for anything else."""
    if len(name) == NAME_DIGITS and name.isdigit():
        return int(name)
    return None


class MappedFile:
    """A file of ``size`` bytes mapped read-write; ``start_offset`` is its first byte's offset."""

    def __init__(self, path: str, start_offset: int, size: int, *, create: bool,
                 pending_dirs=None, growable: bool = False,
                 allocated: int | None = None) -> None:
        """`pending_dirs` (fsutil.PendingDirs): a new file's directory is fsynced with the
        next checkpoint instead of now (derived data, made on the broker's loop).
        `growable`: allocated by `reserve` as it fills, not whole at creation;
        `allocated`: how much of an existing one is (known when mapped again)."""
        self.path = path
        self.growable = growable
        # bytes from the start known to be allocated: writes below this never SIGBUS
        self.allocated = 0
        self.start_offset = start_offset
        self.locked = False
        # Newest store timestamp written here in this process (ms); retention uses it.
        self.max_store_timestamp = 0
        # A new file is allocated under a temporary name and renamed when whole,
        # so a crash never leaves a short file under a real segment name.
        tmp = path + ".alloc"
        fd = (
            os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            if create
            else os.open(path, os.O_RDWR)
        )
        try:
            if create:
                if growable:
                    os.ftruncate(fd, size)  # sparse: extents come with `reserve`
                    self.allocated = _grow(fd, 0, min(size, FIRST_EXTENT))
                else:
                    _allocate(fd, size)
                    self.allocated = size
                if os.path.exists(path):
                    raise FileExistsError(errno.EEXIST, "segment already exists", path)
                os.rename(tmp, path)
                parent = os.path.dirname(path) or "."
                if pending_dirs is None:
                    fsync_path(parent)  # the name must survive a power cut too
                else:
                    pending_dirs.add(parent)
            else:
                size = os.fstat(fd).st_size
                if size == 0:
                    raise OSError(errno.EINVAL, "empty mapped file", path)
                self.allocated = size  # (growable: set from its first hole below)
            # a queue file's mapping holds no descriptor; a segment's is Python's mmap
            self._raw = RawMapping(fd, size) if growable else None
            self.mm = (self._raw.buf if growable else
                       mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
        except BaseException:
            os.close(fd)
            if create:
                _unlink_quietly(tmp)
            raise
        self.fd: int | None = fd
        self.size = size
        self.end_offset = start_offset + size
        if growable:
            if not create:
                # below the first hole every byte is allocated; past it `reserve`
                # allocates again before a write (allocating what is, is a no-op)
                self.allocated = (allocated if allocated is not None
                                  else self.data_end() // PAGE * PAGE)
            # A fault reads the one page it needs: the kernel's readahead zero-filled a
            # large folio of holes per fault, 2 ms of CPU a send at 10,000 queues
            # (a queue is read and written a unit at a time, never streamed through)
            self._raw.madvise(mmap.MADV_RANDOM)
            # A queue file keeps no descriptor: it is flushed by msync on its address,
            # and a rare `reserve` opens the file for the time of one call.
            os.close(fd)
            self.fd = None

    def reserve(self, upto: int) -> None:
        """Allocate at least bytes [0, upto) before they are written (OSError: ENOSPC).
        Extents double from FIRST_EXTENT up to MAX_EXTENT: a handful of calls a file."""
        if upto <= self.allocated:
            return
        extent = min(MAX_EXTENT, max(FIRST_EXTENT, self.allocated))
        end = min(self.size, max(upto, self.allocated + extent))
        fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDWR)
        try:
            self.allocated = _grow(fd, self.allocated, end)
        finally:
            if fd != self.fd:
                os.close(fd)

    def data_end(self) -> int:
        """Where the written bytes end at most: the file's first hole (its size when the
        filesystem cannot say), so finding the last unit does not read 6 MB of holes."""
        fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDONLY)
        try:
            return min(self.size, os.lseek(fd, 0, os.SEEK_HOLE))
        except OSError:
            return self.size
        finally:
            if fd != self.fd:
                os.close(fd)

    def flush(self) -> None:
        """Make everything written so far durable."""
        if self._raw is not None:
            self._raw.msync()  # ValueError once closed, as a closed mmap's
        elif self.fd is None:
            msync_python_mmap(self.mm, self.size)
        else:
            os.fdatasync(self.fd)

    def warm(self) -> None:
        """Fault every page in for writing, so the first writes do not pay for page faults."""
        try:  # one call in the kernel (Linux 5.14+) instead of a Python loop
            (self._raw or self.mm).madvise(_MADV_POPULATE_WRITE)
            return
        except (OSError, ValueError):
            pass
        mm = self.mm
        for pos in range(0, self.size, PAGE):
            mm[pos] = mm[pos]

    def advise(self, advice: int, length: int | None = None) -> None:
        """madvise the mapping (mmap.MADV_*), or its first `length` bytes (a multiple
        of PAGE; a segment's only); a closed one is left alone."""
        try:
            if length is None:
                (self._raw or self.mm).madvise(advice)
            else:
                self.mm.madvise(advice, 0, length)
        except ValueError:  # closed meanwhile (retention)
            pass

    def lock_in_memory(self) -> bool:
        """mlock the mapping; logs a warning and returns False where not permitted."""
        ok = (self._raw.mlock(True) if self._raw is not None
              else mlock_python_mmap(self.mm, self.size, lock=True))
        if not ok:
            log.warning("mlock of %s not permitted; continuing without it", self.path)
        self.locked = ok
        return ok

    def close(self) -> None:
        if self._raw is not None:
            if self._raw.closed:
                return
            if self.locked:
                self._raw.mlock(False)
            self.mm = CLOSED  # a reader that looks again gets ValueError
            self._raw.close()
            return
        if self.mm.closed:
            return
        if self.locked:
            mlock_python_mmap(self.mm, self.size, lock=False)
        self.mm.close()
        if self.fd is not None:
            os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        _unlink_quietly(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, start={self.start_offset}, size={self.size})"


FIRST_EXTENT = 16 << 10  # a queue's first 819 units
MAX_EXTENT = 1 << 20


def _grow(fd: int, start: int, end: int) -> int:
    """Allocate [start, end) of a sparse file; returns `end`."""
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.pwrite(fd, bytes(end - start), start)  # no fallocate here: zeros take the space
    return end


def _allocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        # A filesystem without fallocate: write zeros so space is really taken.
        os.ftruncate(fd, 0)
        chunk = bytes(1 << 20)
        left = size
        while left:
            left -= os.write(fd, chunk[: min(left, len(chunk))])



def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
