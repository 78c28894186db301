"""What "slow" means: over `slow_s` and over `slow_factor` x the cluster baseline,
unless most of the cluster is slow at once (then it is the cluster's slowness).

See `fuse.config` for why the numbers are what they are.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuse.config import FuseConfig
from fuse.state import BrokerState


class SlowJudge:
    def __init__(self, config: FuseConfig) -> None:
        self._config = config
        self.baseline_s: float | None = None
        self.threshold_s: float = config.slow_s
        self._last_slow: dict[str, float] = {}

    def refresh(self, states: Iterable[BrokerState]) -> float:
        """Recompute the baseline from the brokers' recent mean RT; returns the line."""
        cfg = self._config
        means = sorted(st.ewma_s for st in states if st.samples >= cfg.min_samples)
        if len(means) < 3:
            # Too few brokers with data for a cluster view: the absolute line only.
            self.baseline_s = None
            self.threshold_s = cfg.slow_s
        else:
            self.baseline_s = means[int(cfg.baseline_quantile * (len(means) - 1))]
            self.threshold_s = max(cfg.slow_s, cfg.slow_factor * self.baseline_s)
        return self.threshold_s

    def note_slow(self, broker: str, now: float, brokers: int) -> bool:
        """Record a slow call; True when the cluster as a whole is slow right now."""
        self._last_slow[broker] = now
        return self.cluster_slow(now, brokers)

    def mark_slow(self, broker: str, now: float) -> None:
        """Record a slow call without judging yet (a batch of calls overdue together)."""
        self._last_slow[broker] = now

    def cluster_slow(self, now: float, brokers: int) -> bool:
        horizon = now - self._config.cluster_window_s
        recent = sum(1 for t in self._last_slow.values() if t >= horizon)
        return brokers > 0 and recent > self._config.cluster_slow_ratio * brokers

    def forget(self, broker: str) -> None:
        self._last_slow.pop(broker, None)
