"""Memory mappings made through libc, for what Python's mmap cannot do.

Python 3.11's `mmap.mmap` keeps a duplicate of the file's descriptor for the life of
the mapping, so 10,000 mapped queue files were 10,000 descriptors (3.13's
`trackfd=False` is the fix, not yet ours). `RawMapping` maps a file through libc
and keeps none: a queue costs a mapping, not a descriptor, as the JVM's
MappedByteBuffers outlive their channels.

The price of leaving Python's mmap is its guard against use after unmap. A raw
mapping is retired, not unmapped: `close` swaps its buffer for a closed one (a
reader that looks again gets ValueError, as from a closed mmap) and the address
is unmapped by `reap_retired` only after GRACE_S, long past any reader that
fetched the buffer just before (a read is one unpack under the GIL).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import threading
import time
from collections import deque

GRACE_S = 2.0

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
for _fn in (_libc.msync, _libc.madvise):
    _fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
for _fn in (_libc.mlock, _libc.munlock):
    _fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4


def _closed_buffer() -> mmap.mmap:
    m = mmap.mmap(-1, mmap.PAGESIZE)
    m.close()  # struct.unpack_from, slicing and assignment on it raise ValueError
    return m


CLOSED = _closed_buffer()

_retired: deque[tuple[float, int, int]] = deque()  # (unmap after, address, size)
_retired_lock = threading.Lock()


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class RawMapping:
    """A shared read-write mapping of `size` bytes of `fd`; the descriptor may be
    closed once made. `buf` supports the buffer protocol, slicing and slice
    assignment (a ctypes char array over the mapping)."""

    __slots__ = ("addr", "size", "buf")

    def __init__(self, fd: int, size: int) -> None:
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED,
                          fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap: {os.strerror(err)}")
        self.addr = addr
        self.size = size
        self.buf = (ctypes.c_char * size).from_address(addr)

    @property
    def closed(self) -> bool:
        return self.buf is CLOSED

    def madvise(self, advice: int) -> None:
        self._open()
        _check(_libc.madvise(self.addr, self.size, advice), "madvise")

    def msync(self) -> None:
        """Make the mapping's dirty pages durable (ctypes lets go of the GIL meanwhile)."""
        self._open()
        _check(_libc.msync(self.addr, self.size, _MS_SYNC), "msync")

    def mlock(self, lock: bool) -> bool:
        self._open()
        fn = _libc.mlock if lock else _libc.munlock
        return fn(self.addr, self.size) == 0

    def close(self) -> None:
        """Retire the mapping: unusable now, unmapped after GRACE_S."""
        if self.closed:
            return
        self.buf = CLOSED
        with _retired_lock:
            _retired.append((time.monotonic() + GRACE_S, self.addr, self.size))
        reap_retired()

    def _open(self) -> None:
        if self.closed:
            raise ValueError("mapping closed")


def reap_retired(now: float | None = None, *, everything: bool = False) -> int:
    """Unmap retired mappings past their grace period (all of them with `everything`,
    when nothing can read them any more); returns how many."""
    now = time.monotonic() if now is None else now
    done = 0
    while True:
        with _retired_lock:
            if not _retired or not (everything or _retired[0][0] <= now):
                return done
            _due, addr, size = _retired.popleft()
        _check(_libc.munmap(addr, size), "munmap")
        done += 1


def retired_count() -> int:
    with _retired_lock:
        return len(_retired)


def msync_python_mmap(mm: mmap.mmap, size: int) -> None:
    """msync(MS_SYNC) of a Python mmap through libc: ctypes lets go of the GIL for
    the call (mmap.flush holds it while the disk works)."""
    _check(_libc.msync(_address_of(mm), size, _MS_SYNC), "msync")


def mlock_python_mmap(mm: mmap.mmap, size: int, *, lock: bool) -> bool:
    fn = _libc.mlock if lock else _libc.munlock
    return fn(_address_of(mm), size) == 0


def _address_of(mm: mmap.mmap) -> int:
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # an exported buffer would stop mm.close()
