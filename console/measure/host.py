"""The host's and the broker's figures over a step: load, iowait, the broker's CPU and
peak RSS (psutil), and its /stats totals (messages and bytes in and out).

Brokers count their totals when they close a second, up to a second late: a step's
window opens before its sending starts and closes once its counts have settled, and
its rates are per second of sending.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from broker_core.client import admin


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic
    cpu_times: tuple[float, ...]  # the host's /proc/stat: user nice system idle iowait ...
    broker_cpu_s: float
    messages_in: int
    messages_out: int
    bytes_in: int
    bytes_out: int


class BrokerWatch:
    """Samples one broker (its process and its /stats) and the host."""

    def __init__(self, pid: int, http: str) -> None:
        self.proc = psutil.Process(pid)
        self.http = http

    def sample(self, at: float) -> Sample:
        totals = admin.admin_call(self.http, "/stats?history=0", "GET", None, None, 5.0)[
            "totals"]
        t = self.proc.cpu_times()
        return Sample(at, tuple(psutil.cpu_times()), t.user + t.system,
                      int(totals.get("messages_in") or 0), int(totals.get("messages_out") or 0),
                      int(totals.get("bytes_in") or 0), int(totals.get("bytes_out") or 0))

    def peak_rss_mib(self) -> float:
        """VmHWM where Linux has it, else the resident size now."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return self.proc.memory_info().rss / (1 << 20)


def between(a: Sample, b: Sample, seconds: float | None = None) -> dict:
    """The window's figures: rates a second (of `seconds`, default the window's own),
    iowait as a share of the host's CPU."""
    seconds = max(1e-9, seconds or b.at - a.at)
    spent = [y - x for x, y in zip(a.cpu_times, b.cpu_times, strict=True)]
    total = sum(spent) or 1e-9
    fields = psutil.cpu_times()._fields
    iowait = spent[fields.index("iowait")] if "iowait" in fields else 0.0
    stored = b.messages_in - a.messages_in
    cpu = b.broker_cpu_s - a.broker_cpu_s
    return {
        "seconds": seconds,
        "stored_tps": stored / seconds,
        "sub_tps": (b.messages_out - a.messages_out) / seconds,
        "net_in_mb": (b.bytes_in - a.bytes_in) / seconds / 1e6,
        "net_out_mb": (b.bytes_out - a.bytes_out) / seconds / 1e6,
        "iowait_pct": 100.0 * iowait / total,
        "load": os.getloadavg()[0],
        "broker_cores": cpu / seconds,
        "cpu_us_per_msg": cpu / stored * 1e6 if stored > 0 else 0.0,
    }
