"""From the capacity plan to flow-control quotas (限流 set from the plan).

The plan forecasts the cluster's peak send rate; an operator says how that
peak splits over topics (a share each; without one, `*`: every topic may take
the whole peak). Each topic's quota is its planned peak with headroom, and a
broker enforces its part of it: the brokers in service when the fuse holds
its 30 % out (the Double-11 talk) carry the whole peak, so each broker's quota is the
topic's rate over those brokers. The burst is `burst_s` of that rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from heatmap.sla import FUSE_CAP_RATIO, brokers_serving


class QuotaPlanError(ValueError):
    """Bad shares or a plan without quotas; one line."""


@dataclass(frozen=True)
class TopicQuota:
    topic: str  # a topic, or a prefix pattern ending in '*'
    share: float  # of the cluster's planned peak
    planned_peak_msgs_per_s: float  # the topic's share of the forecast peak
    headroom: float  # e.g. 0.2: the quota lets 20 % more through than planned
    cluster_rate: float  # planned peak x (1 + headroom): what the whole cluster admits
    burst_s: float
    warmup_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def parse_shares(text: str) -> dict[str, float]:
    """`orders=0.6,payments=0.3` -> {topic: share}; shares in (0, 1], summing to <= 1."""
    shares: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        topic, sep, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        if not sep or not topic.strip() or not 0 < share <= 1:
            raise QuotaPlanError(f"topic share {part!r}: give TOPIC=SHARE with a share in (0, 1]")
        shares[topic.strip()] = share
    if not shares:
        raise QuotaPlanError("no topic shares given")
    if sum(shares.values()) > 1 + 1e-9:
        raise QuotaPlanError(f"topic shares add up to {sum(shares.values()):g}, over 1")
    return shares


def plan_quotas(peak_msgs_per_s: float, shares: Mapping[str, float] | None,
                headroom: float = 0.2, burst_s: float = 0.1, warmup_s: float = 0.0
                ) -> list[TopicQuota]:
    """Each topic's cluster-wide quota from the forecast peak."""
    if not (peak_msgs_per_s > 0 and math.isfinite(peak_msgs_per_s)):
        raise QuotaPlanError(f"planned peak must be a positive rate, not {peak_msgs_per_s}")
    if headroom < 0 or burst_s <= 0 or warmup_s < 0:
        raise QuotaPlanError("headroom and warm-up must be >= 0 and burst > 0")
    out = []
    for topic, share in sorted((shares or {"*": 1.0}).items()):
        peak = peak_msgs_per_s * share
        out.append(TopicQuota(topic, share, peak, headroom, peak * (1 + headroom), burst_s,
                              warmup_s))
    return out


def brokers_in_service(brokers: int, fuse_reserve: float = FUSE_CAP_RATIO) -> int:
    """Brokers left serving when the fuse isolates its share (at least one)."""
    if brokers < 1:
        raise QuotaPlanError("no brokers to apply quotas to")
    return max(1, brokers_serving(brokers, fuse_reserve))


def per_broker(quota: Mapping, brokers: int, fuse_reserve: float = FUSE_CAP_RATIO) -> dict:
    """One broker's quota (rate, burst, warm-up) for a plan's topic quota."""
    try:
        rate = float(quota["cluster_rate"]) / brokers_in_service(brokers, fuse_reserve)
        burst = max(1.0, rate * float(quota["burst_s"]))
        return {"kind": "topic", "target": str(quota["topic"]), "rate": rate, "burst": burst,
                "warmup_s": float(quota.get("warmup_s", 0.0))}
    except (KeyError, TypeError, ValueError) as exc:
        raise QuotaPlanError(f"malformed quota in the plan: {quota!r} ({exc})") from None
