import os

import pytest

from kernel_tuning.errors import HostError
from kernel_tuning.hostfs import HostFS


def test_reads_writes_and_refuses_to_leave_the_root(tmp_path):
    host = HostFS(tmp_path)
    assert host.read("proc/sys/vm/swappiness") is None
    (tmp_path / "knob").write_text("60\n")
    host.write_knob("knob", "1")
    assert host.read("knob") == "1\n"
    with pytest.raises(HostError, match="does not exist"):
        host.write_knob("absent", "1")  # knobs are never created
    with pytest.raises(HostError, match="leaves the root"):
        host.read("../etc/passwd")


def test_file_without_write_bits_counts_as_read_only_even_for_root(tmp_path):
    host = HostFS(tmp_path)
    knob = tmp_path / "knob"
    knob.write_text("0\n")
    assert host.writable("knob")
    knob.chmod(0o444)
    assert not host.writable("knob")
    assert host.writable("etc/new/file")  # absent: its nearest existing dir decides


def test_config_files_are_atomic_and_created_dirs_tracked(tmp_path):
    host = HostFS(tmp_path)
    assert host.missing_ancestor("etc/a/b/c.conf") == "etc"
    host.write_file("etc/a/b/c.conf", "x=1\n")
    assert host.read("etc/a/b/c.conf") == "x=1\n"
    assert not [n for n in os.listdir(tmp_path / "etc/a/b") if n.startswith(".")]  # no temp left
    host.remove("etc/a/b/c.conf")
    host.remove_empty_dirs("etc/a/b/c.conf", "etc")
    assert not (tmp_path / "etc").exists()


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(HostError, match="not a directory"):
        HostFS(tmp_path / "nope")
