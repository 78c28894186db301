"""Per-op latency the store times itself, safe across threads (the flush thread
records too).

The hot path appends a float to a buffer (tens of nanoseconds); buffers are
folded into heatmap's OpLatency (histogram + exact count over the SLA max) with
one vectorised pass when they fill up or when someone reads. A broker keeps its
own per-second figures (observe.recorder) and takes only the flush times from
here.
"""

from __future__ import annotations

import threading
from array import array

import numpy as np

from heatmap import LatencyHistogram
from heatmap.op_latency import OpLatency

OPS = ("put", "put_batch", "get", "flush")
_FOLD_AT = 1 << 16


class LatencyRecorder:
    def __init__(self, ops: tuple[str, ...] = OPS) -> None:
        self._lock = threading.Lock()
        self._pending = {op: array("d") for op in ops}
        self._spans = {op: OpLatency() for op in ops}
        self._over_taken = dict.fromkeys(ops, 0)

    def record(self, op: str, seconds: float) -> None:
        with self._lock:
            buf = self._pending[op]
            buf.append(seconds)
            if len(buf) >= _FOLD_AT:
                self._fold(op)

    def _fold(self, op: str) -> None:
        buf = self._pending[op]
        if buf:
            self._spans[op].record_many(np.frombuffer(buf, dtype=np.float64))
            self._pending[op] = array("d")

    def _fold_all(self) -> None:
        for op in self._pending:
            self._fold(op)

    @property
    def over_20ms(self) -> dict[str, int]:
        """Exact counts over the SLA max since the store opened (never reset by take())."""
        with self._lock:
            self._fold_all()
            return {op: self._over_taken[op] + s.over_sla for op, s in self._spans.items()}

    def histograms(self) -> dict[str, LatencyHistogram]:
        """The live histograms (since the last take()), pending values folded in."""
        with self._lock:
            self._fold_all()
            return {op: s.hist for op, s in self._spans.items()}

    def take(self) -> dict[str, OpLatency]:
        """Return each op's latencies since the last take() and start new, empty ones."""
        with self._lock:
            self._fold_all()
            taken = self._spans
            self._spans = {op: OpLatency() for op in taken}
            for op, s in taken.items():
                self._over_taken[op] += s.over_sla
            return taken
