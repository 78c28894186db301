"""Durability helpers shared by the store and the broker's metadata files."""

from __future__ import annotations

import os


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file or a directory by path (a directory: so renames in it survive a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PendingDirs:
    """Directories whose new entries (files made since) must be made durable before
    the next checkpoint says what they hold: making a file of derived data (a queue,
    an index) then fsyncs nothing on the caller's thread (the broker's loop) and the
    checkpoint's flush fsyncs each directory once. Thread-safe."""

    def __init__(self) -> None:
        import threading

        self._dirs: set[str] = set()
        self._lock = threading.Lock()

    def add(self, path: str | os.PathLike) -> None:
        with self._lock:
            self._dirs.add(os.fspath(path))

    def sync(self) -> None:
        with self._lock:
            dirs, self._dirs = self._dirs, set()
        try:
            for d in sorted(dirs, key=len, reverse=True):  # children before their parents
                if os.path.isdir(d):
                    fsync_path(d)
        except OSError:
            with self._lock:
                self._dirs |= dirs  # the next checkpoint tries again
            raise


def syncfs(path: str | os.PathLike) -> None:
    """Flush every dirty page of the filesystem holding `path` in one call (syncfs(2)):
    one journal commit for thousands of queue files instead of one per file, each of
    which held the broker's writes to freshly cleaned pages behind it. Python has no
    binding for it; libc's, through ctypes, which lets go of the GIL for the call."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {path}: {os.strerror(err)}")
    finally:
        os.close(fd)
