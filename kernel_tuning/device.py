"""Which disk the scheduler setting applies to: `--device` or `--data-dir`.

A data dir resolves through its st_dev and DIR/sys/dev/block/MAJ:MIN to a
block device; a partition to its disk (by sysfs structure, never by
trimming digits, so nvme0n1p1 -> nvme0n1 and mmcblk0p2 -> mmcblk0); a
device-mapper or md device to the disks under its `slaves/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernel_tuning.errors import HostError
from kernel_tuning.hostfs import HostFS


def block_devices(host: HostFS) -> list[str]:
    return host.listdir("sys/block")


def device_dir(host: HostFS, name: str) -> Path | None:
    for base in ("sys/class/block", "sys/block"):
        p = host.path(f"{base}/{name}")
        if p.exists():
            return Path(os.path.realpath(p))
    return None


def disks_of(host: HostFS, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The whole disks under block device `name` (itself when it is one)."""
    if name in seen:
        return []
    real = device_dir(host, name)
    if real is None:
        known = ", ".join(block_devices(host)) or "none"
        raise HostError(f"no block device {name!r} under {host.shown('sys/block')} (devices: {known})")
    if (real / "partition").exists():
        return disks_of(host, real.parent.name, seen | {name})
    slaves = sorted(os.listdir(real / "slaves")) if (real / "slaves").is_dir() else []
    if slaves:
        out: list[str] = []
        for slave in slaves:
            for disk in disks_of(host, slave, seen | {name}):
                if disk not in out:
                    out.append(disk)
        return out
    return [real.name]


def normalize_name(name: str) -> str:
    name = name.strip()
    if name.startswith("/dev/"):
        name = name[len("/dev/") :]
    return name.replace("/", "!")  # sysfs spells cciss/c0d0 as cciss!c0d0


def disks_for_device(host: HostFS, name: str) -> list[str]:
    name = normalize_name(name)
    if not name or name.startswith("."):
        raise HostError(f"bad device name {name!r}")
    return disks_of(host, name)


def disks_for_data_dir(host: HostFS, data_dir: str | os.PathLike) -> list[str]:
    path = Path(data_dir)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise HostError(f"cannot stat data dir {path}: {exc.strerror or exc}") from None
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    link = host.path(f"sys/dev/block/{major}:{minor}")
    if major != 0 and link.exists():
        return disks_of(host, Path(os.path.realpath(link)).name)
    source = mount_source(host, path)
    if source is None or not source.startswith("/dev/"):
        raise HostError(
            f"data dir {path} is not on a block device (device {major}:{minor}, "
            f"mount source {source or 'unknown'}); give --device NAME"
        )
    return disks_for_device(host, os.path.basename(os.path.realpath(source)))


def mount_source(host: HostFS, path: Path) -> str | None:
    """The source of the mount holding path, from DIR/proc/self/mountinfo."""
    text = host.read("proc/self/mountinfo") or ""
    target = os.path.realpath(path)
    best, best_len = None, -1
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > best_len:
            best, best_len = rest[1], len(mount_point)
    return best
