"""Queue files mapped through libc: no descriptor held, and no unmap under a reader."""

import os
import struct
import time

import pytest

from broker_core.store.libc_map import GRACE_S, RawMapping, reap_retired
from broker_core.store.mapped_file import MappedFile

UNIT = struct.Struct(">qiq")


def _mapped_paths() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


def test_a_raw_mapping_writes_through_to_the_file_and_holds_no_descriptor(tmp_path):
    path = str(tmp_path / "q")
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    os.ftruncate(fd, 1 << 16)
    m = RawMapping(fd, 1 << 16)
    os.close(fd)
    UNIT.pack_into(m.buf, 40, 7, 8, 9)
    m.buf[100:103] = b"abc"
    m.msync()
    with open(path, "rb") as f:
        data = f.read()
    assert UNIT.unpack_from(data, 40) == (7, 8, 9) and data[100:103] == b"abc"
    assert not any(os.readlink(f"/proc/self/fd/{n}") == path
                   for n in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{n}"))
    m.close()
    reap_retired(time.monotonic() + GRACE_S + 1)


def test_a_closed_queue_file_refuses_readers_at_once_and_is_unmapped_after_the_grace(
        tmp_path):
    """A reader that looks at a closed file gets ValueError (as from a closed mmap); the
    address stays mapped for GRACE_S for one that fetched the buffer just before."""
    path = str(tmp_path / "00000000000000000000")
    f = MappedFile(path, 0, 1 << 16, create=True, growable=True)
    UNIT.pack_into(f.mm, 0, 1, 2, 3)
    held = f.mm  # fetched before the close, as a reader between two bytecodes
    f.close()
    with pytest.raises(ValueError):
        UNIT.unpack_from(f.mm, 0)
    with pytest.raises(ValueError):
        f.flush()
    assert UNIT.unpack_from(held, 0) == (1, 2, 3)  # still mapped: no crash
    assert path in _mapped_paths()
    reap_retired(time.monotonic())  # not yet due
    assert path in _mapped_paths()
    reap_retired(time.monotonic() + GRACE_S + 0.1)
    assert path not in _mapped_paths()
    f.close()  # twice: nothing more
