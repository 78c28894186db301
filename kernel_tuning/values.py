"""Targets that depend on the host: sizes, RAM-scaled values, safety bounds.

Free-memory settings scale with MemTotal because the seeds' 3 GiB / 8 GiB
were sized for very large hosts; a hard ceiling keeps a profile from
starving a small one.
"""

from __future__ import annotations

import math
import re

from kernel_tuning.errors import HostError, ProfileError, SafetyError
from kernel_tuning.hostfs import HostFS

# vm.min_free_kbytes above this share of RAM is refused without force.
MIN_FREE_MAX_PERCENT = 5.0
# The kernel accepts watermark_scale_factor 1..1000, and up to 3000 since 6.0.
WATERMARK_SCALE_MIN = 10  # the kernel default; never translate below it

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNIT_KB = {"": 1, "k": 1, "m": 1024, "g": 1024**2, "t": 1024**3}


def parse_size_kb(value, where: str) -> int:
    """A size in KiB from an int (already KiB) or a string like "64M", "3G"."""
    if isinstance(value, bool):
        raise ProfileError(f"{where}: {value!r} is not a size")
    if isinstance(value, int | float):
        return int(value)
    m = _SIZE.match(str(value))
    if not m:
        raise ProfileError(f"{where}: {value!r} is not a size (e.g. 65536, \"64M\", \"3G\")")
    return int(float(m.group(1)) * _UNIT_KB[m.group(2).lower()])


def mem_total_kb(host: HostFS) -> int:
    text = host.read("proc/meminfo")
    if text is None:
        raise HostError(f"cannot read {host.shown('proc/meminfo')}: no such file")
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1])
    raise HostError(f"{host.shown('proc/meminfo')} has no MemTotal line")


def kernel_version(host: HostFS) -> tuple[int, int]:
    text = host.read("proc/sys/kernel/osrelease") or ""
    m = re.match(r"(\d+)\.(\d+)", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def watermark_scale_max(host: HostFS) -> int:
    return 3000 if kernel_version(host) >= (6, 0) else 1000


def resolve_target(spec: dict, where: str, mem_kb: int) -> tuple[str, str]:
    """(target text, mode) of one spec; mode is "exact" or "at_least"."""
    if "at_least" in spec:
        return str(as_int(spec["at_least"], where)), "at_least"
    if "ram_percent" in spec:
        pct = spec["ram_percent"]
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 50:
            raise ProfileError(f"{where}: ram_percent must be a number in (0, 50]")
        kb = mem_kb * pct / 100.0
        if "min" in spec:
            kb = max(kb, parse_size_kb(spec["min"], where))
        if "max" in spec:
            kb = min(kb, parse_size_kb(spec["max"], where))
        return str(int(kb)), "exact"
    value = spec["value"]
    if isinstance(value, bool):
        return ("1" if value else "0"), "exact"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return "\t".join(str(v) for v in value), "exact"
    return str(value), "exact"


def as_int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            return int(str(value))
        except ValueError:
            raise ProfileError(f"{where}: {value!r} is not an integer") from None
    return value


def check_min_free(target_kb: int, mem_kb: int, force: bool) -> None:
    limit = mem_kb * MIN_FREE_MAX_PERCENT / 100.0
    if target_kb > limit and not force:
        raise SafetyError(
            f"vm.min_free_kbytes={target_kb} is {100.0 * target_kb / mem_kb:.1f}% of RAM "
            f"({mem_kb} kB); the limit is {MIN_FREE_MAX_PERCENT:g}% "
            f"({int(limit)} kB); use --force to override"
        )


def extra_free_as_scale_factor(extra_kb: int, mem_kb: int, kernel_max: int) -> int:
    """The watermark_scale_factor that opens about the same gap as extra_free_kbytes.

    The factor is in units of 0.01 % of memory: the kernel keeps
    factor/10000 of RAM between the min, low and high watermarks, which is
    what extra_free_kbytes added on the kernels that had it.
    """
    factor = math.ceil(extra_kb * 10000 / mem_kb)
    return max(WATERMARK_SCALE_MIN, min(factor, kernel_max))
