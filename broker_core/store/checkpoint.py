"""The checkpoint file: how far the CommitLog and the ConsumeQueues are known durable.

``safe_offset``: every CommitLog record below it and every ConsumeQueue
unit pointing below it are on disk, so crash recovery only scans (and
rebuilds queue units) from there. ``commitlog_flushed`` is informational.
Written to a temporary file, fsynced and renamed, so a crash leaves either
the old or the new checkpoint, never a torn one; a CRC guards the rest.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from broker_core.fsutil import atomic_write

_MAGIC = b"FGCK"
_BODY = struct.Struct(">4sHqqq")  # magic, version, safe, flushed, timestamp ms
_CRC = struct.Struct(">I")
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    safe_offset: int
    commitlog_flushed: int
    timestamp_ms: int

    def save(self, path: str) -> None:
        body = _BODY.pack(
            _MAGIC, _VERSION, self.safe_offset, self.commitlog_flushed, self.timestamp_ms
        )
        atomic_write(path, body + _CRC.pack(zlib.crc32(body)))

    @classmethod
    def load(cls, path: str) -> Checkpoint | None:
        """The saved checkpoint, or None if absent or unreadable (recovery then scans all)."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        if len(raw) != _BODY.size + _CRC.size:
            return None
        body = raw[: _BODY.size]
        if _CRC.unpack(raw[_BODY.size :])[0] != zlib.crc32(body):
            return None
        magic, version, safe, flushed, ts = _BODY.unpack(body)
        if magic != _MAGIC or version != _VERSION or safe < 0:
            return None
        return cls(safe, flushed, ts)
