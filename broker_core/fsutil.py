"""Durability helpers shared by the store and the broker's metadata files."""

from __future__ import annotations

import json
import os
import tempfile


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file or a directory by path (a directory: so renames in it survive a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Make the finished file `tmp` durable under the name `path`: fsync it, rename it
    over `path` (atomic: a reader sees the old file or the new, whole), fsync the
    directory so the rename survives a power cut. `tmp` must be in `path`'s directory."""
    fsync_path(tmp)
    os.replace(tmp, path)
    fsync_path(os.path.dirname(os.fspath(path)) or ".")


def atomic_write(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` so that a crash leaves the old content or the new,
    never a torn file: the one way every broker_core file of state is written (the
    checkpoint, topic, offset and quota tables, epochs, the cluster file)."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")
    try:
        os.fchmod(fd, mode)  # mkstemp makes it 0600 whatever the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        publish(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(path: str | os.PathLike, doc: object) -> None:
    """`atomic_write` of a JSON document (keys sorted: a diff shows what changed)."""
    atomic_write(path, json.dumps(doc, sort_keys=True).encode())


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
