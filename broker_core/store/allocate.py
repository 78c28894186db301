"""Pre-allocation of the next CommitLog segment in the background (RocketMQ's AllocateMappedFileService).

Creating a 1 GiB segment (fallocate, optional warm-up and mlock) takes long
enough to show up as a put latency spike, so while segment N is being
written segment N+1 is prepared by this thread; the roll then only swaps.
"""

from __future__ import annotations

import logging
import os
import threading

from broker_core.store.mapped_file import MappedFile, file_name

log = logging.getLogger(__name__)


class SegmentAllocator:
    def __init__(
        self, directory: str, size: int, *, warm: bool, mlock: bool, background: bool
    ) -> None:
        self.directory = directory
        self.size = size
        self.warm = warm
        self.mlock = mlock
        self.background = background
        self._lock = threading.Lock()
        self._ready: dict[int, MappedFile] = {}
        self._pending: dict[int, threading.Thread] = {}
        self.last_error: OSError | None = None

    def create(self, start: int) -> MappedFile:
        """Create the segment starting at ``start`` now (raises OSError, e.g. ENOSPC)."""
        seg = MappedFile(
            os.path.join(self.directory, file_name(start)), start, self.size, create=True
        )
        if self.warm:
            seg.warm()
        if self.mlock:
            seg.lock_in_memory()
        return seg

    def prepare(self, start: int) -> None:
        """Start creating the segment at ``start`` in the background (no-op if not enabled)."""
        if not self.background:
            return
        with self._lock:
            if start in self._ready or start in self._pending:
                return
            t = threading.Thread(
                target=self._run, args=(start,), name="segment-allocator", daemon=True
            )
            self._pending[start] = t
        t.start()

    def _run(self, start: int) -> None:
        try:
            seg = self.create(start)
        except OSError as exc:
            log.warning("pre-allocating segment %s failed: %s", file_name(start), exc)
            self.last_error = exc
            seg = None
        with self._lock:
            self._pending.pop(start, None)
            if seg is not None:
                self._ready[start] = seg

    def take(self, start: int) -> MappedFile:
        """The segment at ``start``: the pre-allocated one if any, else created now."""
        with self._lock:
            pending = self._pending.get(start)
        if pending is not None:
            pending.join()
        with self._lock:
            seg = self._ready.pop(start, None)
        return seg if seg is not None else self.create(start)

    def discard(self) -> None:
        """Drop segments prepared but never used (at close, so they leave no empty files)."""
        with self._lock:
            pending = list(self._pending.values())
        for t in pending:
            t.join()
        with self._lock:
            ready, self._ready = self._ready, {}
        for seg in ready.values():
            seg.destroy()
