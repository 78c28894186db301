"""The data dir's ``lock`` file: one MessageStore per directory, across processes.

flock is tied to the open file, so it also stops a second store in the same
process, and the kernel drops it when the holder dies (SIGKILL included).
"""

from __future__ import annotations

import fcntl
import os

from broker_core.errors import StoreLockedError


def take_lock(path: str) -> int:
    """Lock ``path`` for this store (the fd is kept open until close); StoreLockedError if held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLockedError(
            f"store {os.path.dirname(path)} is in use by another store (pid {holder})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
