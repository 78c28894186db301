"""What "slow" means: over `slow_s` and over `slow_factor` x the cluster baseline,
and slow alone: not while most of the cluster is slow at once (the cluster's
slowness), nor while most brokers' calls aged together (the client's or the
shared host's lateness).

See `fuse.config` for why the numbers are what they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fuse.config import FuseConfig
from fuse.crowd import CrowdWindow
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


ALONE, SHARED, UNSURE = "alone", "shared", "unsure"


def slow_alone(broker: str, evidence_s: float, serving: Iterable[str],
               states: dict[str, BrokerState], aged_before: Callable[[float], dict[str, int]],
               crowd: CrowdWindow, now: float, line: float, config: FuseConfig) -> str:
    """Is `broker` slow alone? Its evidence is a call that waited `evidence_s`.

    ALONE: isolate it. SHARED: the client or the host all brokers share was
    late, not `broker` (a PageCache stall is one broker's, host contention
    everyone's). UNSURE: not yet; judge again on stronger evidence.

    A late call (up to stuck) is SHARED when the crowd of calls turned sluggish
    while it waited (`fuse.crowd`; calls still in flight that already took a
    quarter of the line count as sluggish), and UNSURE while the crowd is
    stirring and the call has not waited twice the line. Any call is SHARED
    when most other brokers seen meanwhile *aged* too: a call to them waited
    a quarter as long (and at least half the line), in flight
    (`aged_before(wait)` counts them) or answered meanwhile: the crowd counts
    calls, this counts brokers, which holds when a few brokers carry most of
    them. "Most" needs two others seen, or the one other where only one serves
    (a cluster of two): needing two there, a host short of CPU for 250 ms had
    both brokers of a two-group cluster isolated, one after the other.
    """
    others = {b for b in serving if b != broker}
    stuck = evidence_s > config.stuck_line(line)
    mood = "calm"
    if not stuck:
        in_flight = aged_before(config.aged_fraction * line)
        waiting = sum(n for b, n in in_flight.items() if b in others)
        mood = crowd.judge(now - max(line, evidence_s), now, config.crowd_share,
                           config.crowd_factor, waiting)
        if mood == "surged":
            return SHARED
    # per broker: did most others seen meanwhile wait a quarter as long?
    aged_s = config.aged_fraction * max(2.0 * line, evidence_s)
    recent = now - max(2.0 * line, evidence_s)  # answers that overlapped the evidence
    waiting_brokers = aged_before(aged_s).keys() & others
    aged = waiting_brokers | {b for b in others if states[b].sluggish_at >= recent
                              and states[b].sluggish_s >= aged_s}
    seen = waiting_brokers | {b for b in others if states[b].seen_at >= recent}
    if len(seen) >= min(2, len(others)) > 0 and len(aged) >= config.aged_ratio * len(seen):
        return SHARED
    return UNSURE if mood == "stirring" and evidence_s < 2.0 * line else ALONE
