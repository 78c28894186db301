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
