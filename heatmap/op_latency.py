"""One operation's latencies over a span: the histogram and the exact count over
the SLA maximum. A bucket boundary cannot say "over 20 ms", so every recorder
(the store's, the broker's per second) counts it here, by one rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from heatmap.histogram import LatencyHistogram
from heatmap.sla import SLA_MAX_S


@dataclass
class OpLatency:
    hist: LatencyHistogram = field(default_factory=LatencyHistogram)
    over_sla: int = 0

    def record(self, seconds: float) -> None:
        self.hist.record(seconds)
        if seconds > SLA_MAX_S:
            self.over_sla += 1

    def record_many(self, seconds: np.ndarray) -> None:
        self.hist.record_many(seconds)
        self.over_sla += int(np.count_nonzero(seconds > SLA_MAX_S))

    def merge(self, other: OpLatency) -> None:
        self.hist.merge(other.hist)
        self.over_sla += other.over_sla
