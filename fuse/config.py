"""Fuse settings with their defaults, validated in one place.

Why these defaults (the Double-11 talk, "在线熔断机制", and its SLA: 3 ms average, 20 ms
max per send):

- ``isolation_s = 60`` and ``max_isolated_ratio = 0.3`` are rules 1-3 verbatim.
- ``slow_s = 0.010``: half the 20 ms max-RT goal. A call still in flight at
  10 ms is about to miss 20 ms, and every millisecond of detection lets
  another ``rate_per_broker x 1 ms`` sends into a stalled broker, so the line
  sits well under 20 ms; it sits over 3x the 3 ms average so a healthy
  broker's tail does not trip it.
- ``slow_factor = 10`` x the cluster ``baseline`` (the 25th percentile of the
  brokers' recent mean RT): a call is slow only if it is also 10x slower than
  the mean of a healthy quarter of the cluster right now. A healthy storage
  node's p999 sits within ~5-10x its mean, so 10x is past the tail of any
  broker doing what the others do, and still far under a 200 ms stall.
  When the line rises (every ``baseline_interval_s``), slowness isolations
  whose slowest call sits 20 % under the new line are released ("rejudged"):
  they were isolated in the moments before the baseline caught up. The 25th percentile
  stays on the healthy brokers even when half the cluster is slow (the cap
  then does its job) but rises with a cluster-wide slowdown, lifting the line
  so nothing is isolated for nothing.
- ``warmup_calls = 20`` and ``warmup_s = 2``: a broker's first 20 answers, and
  those of the first two seconds after its first, do not count as slow (they
  carry the connect, the first writes to its files, a busy starting host); an
  error isolates from the first call. (``min_samples``, also 20, is what a broker
  needs before its mean enters the baseline.)
- ``slow_calls = 2`` counts within ``slow_window_s = 1`` isolate a broker. A
  call counts once past the line and once more past twice the line (while
  still in flight, or when it returns). One call in a million just past the
  line is a healthy broker's tail (at 10,000 sends/s that is one every 100 s,
  each costing a tenth of the cluster for a minute); a stuck broker shows a
  second slow call within a millisecond, and a single call past twice the
  line (22 ms) has missed the 20 ms goal anyway, so a one-thread producer
  still isolates a stalled broker about 22 ms in. An error isolates at once
  (rule 3).
- ``cluster_slow_ratio = 0.6`` in ``cluster_window_s = 1``: the baseline is
  averaged and lags; if more than 60 % of the brokers were slow within the last
  second the slowness is the cluster's (or the producer's own host), so slow
  calls stop isolating and slowness isolations begun in that second are
  released. 60 % is above half so that a half-slow cluster still isolates up
  to the cap.
- ``aged_ratio = 0.5`` of the other serving brokers ``aged`` at the moment a
  broker would be isolated for slowness (a call to them, in flight or answered
  while the evidence waited, took ``aged_fraction = 0.25`` of the line, 2.5 ms:
  a healthy broker's p999 on loopback and ~p97 in the simulator; for stuck
  evidence, a quarter of its wait) says the slowness is shared: the
  client's host or the brokers' shared host was short of CPU for a few tens
  of ms (judged over at least two other brokers, or the one other in a cluster
  of two). A stalled broker is slow alone, so nobody is isolated then and its
  next slow call is judged afresh. The cluster-wide rule above needs a second
  of history and releases after the fact; this one decides before isolating.
- ``crowd_share = 0.15`` and ``crowd_factor = 3``: when, while the evidence
  waited, at least 15 % of all answers were sluggish and three times the
  usual share, the crowd of calls slowed together (`fuse.crowd`): a host or
  network hiccup, not this broker. Counted per call, it holds where each
  broker sees too few calls in 20 ms for the per-broker count above; a broker
  that is always slow raises the usual share, so it is still judged.
- ``stuck_factor = 4``: a call in flight past 4x the line (40 ms) is stuck,
  not late: a baseline that lags a cluster-wide slowdown by 100 ms does not
  make calls 40x its mean. Stuck calls isolate even inside a cluster-slow
  second (when they are slow alone), and a broker with stuck calls is not
  released as cluster-slow or rejudged.
- ``hung_factor = 10``: past 10x the line (100 ms) a call hangs. A broker on the
  client's own host (``Fuse(colocated=...)``: loopback, as in the demo) shares
  its cores with the client and the other brokers, and single-broker hiccups
  of up to ~50 ms (garbage collection, a core taken) were measured on a busy
  2-core demo host; such a broker is isolated for slowness only once a call
  hangs. A PageCache stall (200 ms and more in the Double-11 talk) still goes in 100 ms.
- ``hung_ceiling_s = 0.12``: the stuck and hung lines follow the baseline, but no
  higher than this. On a loaded demo host the baseline rose to 3.7 ms, the line to
  37 ms and a hang to 373 ms: a stall of 200-370 ms then went unnoticed, stall after
  stall. 120 ms is over twice the hiccups above, and a 200 ms stall reaches it even
  when the client was away for a third of it.
- ``jitter_ratio = 0.1``: each isolation lasts up to 10 % longer, drawn from an
  injected seed, so producers that isolated a broker together do not all
  return to it in the same millisecond.
- ``backoff = 1.0`` (off). When > 1, an isolation starting within
  ``isolation_s`` of the previous release lasts ``backoff`` times longer than
  the previous one, bounded by ``max_isolation_s`` (600 s, RocketMQ's longest).
- ``tick_s = slow_s / 10``: how often the hot path does housekeeping
  (expiry, in-flight judgement): the in-flight judgement is late by at most 1 ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fuse.errors import FuseError
from heatmap.sla import FUSE_CAP_RATIO, FUSE_ISOLATION_S, fuse_cap


@dataclass(frozen=True)
class FuseConfig:
    isolation_s: float = FUSE_ISOLATION_S
    max_isolated_ratio: float = FUSE_CAP_RATIO
    slow_s: float = 0.010
    slow_factor: float = 10.0
    baseline_quantile: float = 0.25
    baseline_interval_s: float = 0.1
    ewma_alpha: float = 0.05
    min_samples: int = 20
    warmup_calls: int = 20
    warmup_s: float = 2.0
    slow_calls: int = 2
    slow_window_s: float = 1.0
    cluster_slow_ratio: float = 0.6
    cluster_window_s: float = 1.0
    aged_ratio: float = 0.5
    aged_fraction: float = 0.25
    stuck_factor: float = 4.0
    hung_factor: float = 10.0
    hung_ceiling_s: float = 0.12
    crowd_share: float = 0.15
    crowd_factor: float = 3.0
    jitter_ratio: float = 0.1
    backoff: float = 1.0
    max_isolation_s: float = 600.0
    tick_s: float | None = None
    dry_run: bool = False

    @property
    def housekeeping_s(self) -> float:
        return self.tick_s if self.tick_s is not None else self.slow_s / 10.0

    def validate(self) -> FuseConfig:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise FuseError(f"{name} must be a finite number > 0, got {value!r}")

        for name in ("isolation_s", "slow_s", "slow_factor", "baseline_interval_s",
                     "cluster_window_s", "max_isolation_s", "slow_window_s", "hung_ceiling_s"):
            positive(name)
        if self.tick_s is not None:
            positive("tick_s")
        if not 0.0 <= self.max_isolated_ratio < 1.0:
            raise FuseError(f"max_isolated_ratio must be in [0, 1), got {self.max_isolated_ratio!r}")
        if not 0.0 < self.baseline_quantile < 1.0:
            raise FuseError(f"baseline_quantile must be in (0, 1), got {self.baseline_quantile!r}")
        if not 0.0 < self.ewma_alpha <= 1.0:
            raise FuseError(f"ewma_alpha must be in (0, 1], got {self.ewma_alpha!r}")
        if not 0.0 < self.cluster_slow_ratio <= 1.0:
            raise FuseError(f"cluster_slow_ratio must be in (0, 1], got {self.cluster_slow_ratio!r}")
        if not 0.0 < self.aged_ratio <= 1.0:
            raise FuseError(f"aged_ratio must be in (0, 1], got {self.aged_ratio!r}")
        if not 0.0 < self.aged_fraction < 1.0:
            raise FuseError(f"aged_fraction must be in (0, 1), got {self.aged_fraction!r}")
        if not 0.0 < self.crowd_share <= 1.0:
            raise FuseError(f"crowd_share must be in (0, 1], got {self.crowd_share!r}")
        if not self.crowd_factor >= 1.0:
            raise FuseError(f"crowd_factor must be >= 1, got {self.crowd_factor!r}")
        if not 2.0 < self.stuck_factor <= 100.0:
            raise FuseError(f"stuck_factor must be in (2, 100], got {self.stuck_factor!r}")
        if not self.stuck_factor < self.hung_factor <= 1000.0:
            raise FuseError(f"hung_factor must be in (stuck_factor, 1000], got {self.hung_factor!r}")
        if not 0.0 <= self.jitter_ratio <= 0.1:
            raise FuseError(f"jitter_ratio must be in [0, 0.1], got {self.jitter_ratio!r}")
        if not 1.0 <= self.backoff <= 8.0:
            raise FuseError(f"backoff must be in [1, 8] (1 = off), got {self.backoff!r}")
        if self.max_isolation_s < self.isolation_s:
            raise FuseError(
                f"max_isolation_s ({self.max_isolation_s}) must be >= isolation_s ({self.isolation_s})"
            )
        if not isinstance(self.slow_calls, int) or self.slow_calls < 1:
            raise FuseError(f"slow_calls must be an integer >= 1, got {self.slow_calls!r}")
        if not (isinstance(self.warmup_s, int | float) and 0 <= self.warmup_s <= 60):
            raise FuseError(f"warmup_s must be in [0, 60] seconds, got {self.warmup_s!r}")
        if not isinstance(self.warmup_calls, int) or self.warmup_calls < 0:
            raise FuseError(f"warmup_calls must be an integer >= 0, got {self.warmup_calls!r}")
        if not isinstance(self.min_samples, int) or self.min_samples < 1:
            raise FuseError(f"min_samples must be an integer >= 1, got {self.min_samples!r}")
        return self

    def stuck_line(self, line: float) -> float:
        """Where a call in flight is stuck, for a slow line of `line` seconds."""
        return min(self.stuck_factor * line, self.hung_ceiling_s)

    def hung_line(self, line: float) -> float:
        """Where a call in flight hangs (never before it is stuck)."""
        return min(self.hung_factor * line, self.hung_ceiling_s)

    def cap(self, brokers: int) -> int:
        """floor(ratio x N) (heatmap.sla.fuse_cap)."""
        return fuse_cap(brokers, self.max_isolated_ratio)
