"""Per-op latency recording for the store, into heatmap.LatencyHistogram (DESIGN.md layout).

The hot path appends a float to a buffer (tens of nanoseconds); buffers are
folded into the histograms with one vectorised ``record_many`` when they fill
up or when someone reads. Latencies above 20 ms (seed 000's maximum) are also
counted exactly per op, since a bucket boundary cannot say "over 20 ms".
"""

from __future__ import annotations

import threading
from array import array

import numpy as np

from heatmap import LatencyHistogram
from heatmap.sla import SLA_MAX_S

OPS = ("put", "put_batch", "get", "flush")
_FOLD_AT = 1 << 16


class LatencyRecorder:
    def __init__(self, ops: tuple[str, ...] = OPS) -> None:
        self._lock = threading.Lock()
        self._pending = {op: array("d") for op in ops}
        self._hists = {op: LatencyHistogram() for op in ops}
        self.over_20ms = dict.fromkeys(ops, 0)  # exact, never reset by take()

    def record(self, op: str, seconds: float) -> None:
        with self._lock:
            buf = self._pending[op]
            buf.append(seconds)
            if seconds > SLA_MAX_S:
                self.over_20ms[op] += 1
            if len(buf) >= _FOLD_AT:
                self._fold(op)

    def _fold(self, op: str) -> None:
        buf = self._pending[op]
        if buf:
            self._hists[op].record_many(np.frombuffer(buf, dtype=np.float64))
            self._pending[op] = array("d")

    def histograms(self) -> dict[str, LatencyHistogram]:
        """The live histograms (since the last take()), pending values folded in."""
        with self._lock:
            for op in self._pending:
                self._fold(op)
            return dict(self._hists)

    def take(self) -> dict[str, LatencyHistogram]:
        """Return the histograms since the last take() and start new, empty ones."""
        with self._lock:
            for op in self._pending:
                self._fold(op)
            taken = self._hists
            self._hists = {op: LatencyHistogram() for op in taken}
            return taken


def summarize(h: LatencyHistogram) -> dict:
    """count, mean, p50, p99, max in seconds (None when empty), for stats()."""
    return {
        "count": h.count,
        "mean_s": h.mean if h.count else None,
        "p50_s": h.quantile(0.5),
        "p99_s": h.quantile(0.99),
        "max_s": h.max if h.count else None,
    }
