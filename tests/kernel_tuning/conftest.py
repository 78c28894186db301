"""Fake root trees: what the engine reads and writes under DIR instead of /.

A tree holds DIR/proc/meminfo, DIR/proc/sys/..., DIR/sys/block/<dev>/queue/
scheduler and DIR/sys/kernel/mm/transparent_hugepage/*, laid out as the
kernel does (sysfs device links are relative symlinks into sys/devices).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GIB_KB = 1024 * 1024

# Values of a stock kernel without the extra_free_kbytes patch.
DEFAULT_SYSCTLS = {
    "fs.file-max": "9223372036854775807",
    "fs.nr_open": "1048576",
    "vm.max_map_count": "65530",
    "vm.min_free_kbytes": "67584",
    "vm.watermark_scale_factor": "10",
    "vm.zone_reclaim_mode": "0",
    "kernel.numa_balancing": "1",
    "vm.swappiness": "60",
    "vm.overcommit_memory": "0",
    "vm.dirty_background_ratio": "10",
    "vm.dirty_ratio": "20",
    "vm.dirty_writeback_centisecs": "500",
    "vm.dirty_expire_centisecs": "3000",
    "vm.page-cluster": "3",
    "vm.lowmem_reserve_ratio": "256\t256\t32\t0\t0",
    "kernel.osrelease": "6.1.0-fake",
}


class FakeTree:
    def __init__(self, root: Path):
        self.root = root

    def file(self, rel: str, text: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def sysctl(self, key: str, value: str) -> Path:
        return self.file("proc/sys/" + key.replace(".", "/"), value + "\n")

    def sysctl_value(self, key: str) -> str:
        return self.read("proc/sys/" + key.replace(".", "/"))

    def disk(self, name: str, scheduler: str = "none [mq-deadline] kyber bfq", parent_dir="virtual/block"):
        """A whole disk: sys/devices/.../NAME, sys/block/NAME and sys/class/block/NAME links."""
        dev = self.root / "sys/devices" / parent_dir / name
        (dev / "queue").mkdir(parents=True, exist_ok=True)
        (dev / "queue/scheduler").write_text(scheduler + "\n")
        self._link(f"sys/block/{name}", dev)
        self._link(f"sys/class/block/{name}", dev)
        return dev

    def partition(self, disk_dev: Path, name: str) -> Path:
        part = disk_dev / name
        part.mkdir(parents=True, exist_ok=True)
        (part / "partition").write_text("1\n")
        self._link(f"sys/class/block/{name}", part)
        return part

    def dev_number(self, major: int, minor: int, target: Path) -> None:
        self._link(f"sys/dev/block/{major}:{minor}", target)

    def _link(self, rel: str, target: Path) -> None:
        link = self.root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(os.path.relpath(target, link.parent))


def make_tree(root: Path, mem_gib: float = 64, sysctls: dict | None = None, extra_free: bool = False) -> FakeTree:
    tree = FakeTree(root)
    mem_kb = int(mem_gib * GIB_KB)
    tree.file("proc/meminfo", f"MemTotal:       {mem_kb} kB\nMemFree:        {mem_kb // 2} kB\n")
    values = dict(DEFAULT_SYSCTLS)
    if extra_free:
        values["vm.extra_free_kbytes"] = "0"
    values.update(sysctls or {})
    for key, value in values.items():
        if value is not None:
            tree.sysctl(key, value)
    thp = "sys/kernel/mm/transparent_hugepage"
    tree.file(f"{thp}/enabled", "always [madvise] never\n")
    tree.file(f"{thp}/defrag", "always defer defer+madvise [madvise] never\n")
    tree.file("sys/devices/system/node/online", "0-1\n")
    tree.disk("vda")
    return tree


@pytest.fixture
def tree(tmp_path) -> FakeTree:
    return make_tree(tmp_path / "root")


@pytest.fixture
def profile_dir(tmp_path) -> Path:
    d = tmp_path / "profiles"
    d.mkdir()
    return d


@pytest.fixture(name="make_tree")
def make_tree_fixture():
    """make_tree(root, mem_gib=64, sysctls=None, extra_free=False) -> FakeTree."""
    return make_tree


