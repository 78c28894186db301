"""This host's figures for the Host screen: kernel tuning compliance of a
profile (kernel_tuning.verify_profile, nothing written) and psutil figures
(CPU, memory, page cache, dirty and writeback pages, disk IO rates).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def _meminfo(root: str = "/") -> dict[str, int]:
    """Dirty and Writeback are only in /proc/meminfo (psutil has no field for them)."""
    out = {}
    try:
        for line in (Path(root) / "proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Dirty", "Writeback", "Cached"):
                out[key.lower()] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


class HostProbe:
    """Samples the host; disk IO is a rate between two calls."""

    def __init__(self, profile: str = "broker", root: str = "/") -> None:
        self.profile, self.root = profile, root
        self._last_io: tuple[float, Any] | None = None

    def tuning(self) -> dict[str, Any]:
        try:
            from kernel_tuning import verify_profile

            return verify_profile(self.profile, root=self.root)
        except Exception as exc:  # noqa: BLE001 - shown on the Host screen, not raised
            return {"profile": self.profile, "error": f"{type(exc).__name__}: {exc}"}

    def figures(self) -> dict[str, Any]:
        import psutil

        vm = psutil.virtual_memory()
        now, io = time.monotonic(), psutil.disk_io_counters()
        rates = {}
        if io is not None and self._last_io is not None:
            dt = max(1e-6, now - self._last_io[0])
            last = self._last_io[1]
            rates = {"read_bytes_per_s": (io.read_bytes - last.read_bytes) / dt,
                     "write_bytes_per_s": (io.write_bytes - last.write_bytes) / dt}
        if io is not None:
            self._last_io = (now, io)
        return {"cpu_percent": psutil.cpu_percent(interval=None),
                "cpus": psutil.cpu_count(), "load": list(psutil.getloadavg()),
                "mem_total": vm.total, "mem_available": vm.available,
                "mem_percent": vm.percent, "page_cache": getattr(vm, "cached", None),
                **_meminfo(self.root), "disk_io": rates}

    def fetch(self) -> dict[str, Any]:
        return {"tuning": self.tuning(), "figures": self.figures()}
