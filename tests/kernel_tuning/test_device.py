import os

import pytest

from kernel_tuning.device import disks_for_data_dir, disks_for_device
from kernel_tuning.errors import HostError
from kernel_tuning.hostfs import HostFS


def test_named_disk_partition_and_dev_prefix(tree):
    host = HostFS(tree.root)
    nvme = tree.disk("nvme0n1", parent_dir="pci0000:00/0000:00:04.0/nvme/nvme0")
    tree.partition(nvme, "nvme0n1p1")
    assert disks_for_device(host, "vda") == ["vda"]
    assert disks_for_device(host, "/dev/nvme0n1p1") == ["nvme0n1"]  # not "nvme0n"
    with pytest.raises(HostError, match=r"no block device 'sdz'.*devices: nvme0n1, vda"):
        disks_for_device(host, "sdz")


def test_device_mapper_resolves_to_its_slaves(tree):
    host = HostFS(tree.root)
    sda = tree.disk("sda")
    sdb = tree.disk("sdb")
    tree.partition(sda, "sda2")
    tree.partition(sdb, "sdb2")
    dm = tree.disk("dm-0", "none")
    (dm / "slaves").mkdir()
    for part in ("sda2", "sdb2"):
        (dm / "slaves" / part).symlink_to(os.path.relpath(sda / part if part == "sda2" else sdb / part, dm / "slaves"))
    assert disks_for_device(host, "dm-0") == ["sda", "sdb"]


def test_data_dir_through_sys_dev_block(tree, tmp_path):
    host = HostFS(tree.root)
    data = tmp_path / "store"
    data.mkdir()
    st = os.stat(data)
    nvme = tree.disk("nvme1n1")
    part = tree.partition(nvme, "nvme1n1p3")
    tree.dev_number(os.major(st.st_dev), os.minor(st.st_dev), part)
    assert disks_for_data_dir(host, data) == ["nvme1n1"]


def test_data_dir_without_block_device_falls_back_to_mountinfo(tree, tmp_path):
    host = HostFS(tree.root)
    data = tmp_path / "store"
    data.mkdir()
    real = os.path.realpath(data)
    tree.file(
        "proc/self/mountinfo",
        "22 1 0:21 / / rw - overlay overlay rw\n"
        f"30 22 0:40 / {real} rw,relatime - btrfs /dev/vda rw\n",
    )
    assert disks_for_data_dir(host, data) == ["vda"]
    tree.file("proc/self/mountinfo", f"30 22 0:40 / {real} rw - tmpfs tmpfs rw\n")
    with pytest.raises(HostError, match="not on a block device.*--device"):
        disks_for_data_dir(host, data)
    with pytest.raises(HostError, match="cannot stat data dir"):
        disks_for_data_dir(host, tmp_path / "absent")
