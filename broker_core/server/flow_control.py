"""Broker flow control (限流, the Double-11 talk's "capacity assurance"; the RocketMQ design talk puts it
on the broker right after the health check): token buckets per topic and per
producer group, set at runtime and kept in the data dir.

A send over its quota is refused at once with FLOW_CONTROL and a retry-after
hint (the time until its tokens are back), not queued: queueing would turn a
flood into latency for every other sender on the broker.

Warm-up in Alibaba Sentinel's spirit (its WarmUp controller eases traffic in
at the 00:00 flash peak): after a cold start a bucket admits a third of its
rate, rising linearly to the full rate over `warmup_s`. A bucket is cold when
it is created (broker start, quota set) or after `warmup_s` with no sends.
Sentinel infers coldness from unspent tokens; an idle timer says the same
thing in a way an operator can predict from the quota alone.

Rules name an exact topic or group, or a prefix pattern ending in `*` (`*`
alone: every one). Exact names win, then the longest prefix. A pattern's
quota applies to each matching name separately (every topic its own bucket),
as a per-resource rule does in Sentinel.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.fsutil import write_json_atomic
from broker_core.json_table import read_json
from broker_core.names import MAX_TOPIC, NAME_CHARS, NAME_RULE

KINDS = ("topic", "group")
COLD_FACTOR = 3.0  # Sentinel's default: a cold bucket admits rate / 3
MAX_PAIRS = 100_000  # (topic, group) pairs remembered on the send path
DEFAULT_BURST_S = 0.1  # burst default: 100 ms of the rate (at least one message)
# a topic's name (broker_core.names) or a producer group's, which may hold "." (saved
# quotas on one must still load)
_NAME = f"[.{NAME_CHARS}]"
TARGET_RE = re.compile(rf"^(?:{_NAME}{{1,{MAX_TOPIC}}}|{_NAME}{{0,{MAX_TOPIC - 1}}}\*)$")


class QuotaError(ValueError):
    """A malformed quota; the message is one line saying what is wrong."""


@dataclass(frozen=True, slots=True)
class Quota:
    kind: str  # topic | group
    target: str  # an exact name, or a prefix ending in '*'
    rate: float  # messages per second
    burst: float  # tokens a full bucket holds (messages admitted at once)
    warmup_s: float = 0.0

    @classmethod
    def make(cls, kind: str, target: str, rate: float, burst: float | None = None,
             warmup_s: float = 0.0) -> Quota:
        """A checked quota; raises QuotaError with one line."""
        if kind not in KINDS:
            raise QuotaError(f"quota kind must be topic or group, not {kind!r}")
        if not isinstance(target, str) or not TARGET_RE.match(target):
            raise QuotaError(f"unknown {kind} pattern {target!r}: give a name of {NAME_RULE} "
                             f"or . (up to {MAX_TOPIC}), or a prefix ending in '*'")
        rate = _number(rate, "rate")
        if rate <= 0:
            raise QuotaError(f"rate must be a positive number of messages per second, not {rate:g}")
        burst = max(1.0, rate * DEFAULT_BURST_S) if burst is None else _number(burst, "burst")
        if burst < 1:
            raise QuotaError(f"burst must be at least 1 message, not {burst:g}")
        warmup_s = _number(warmup_s, "warmup")
        if warmup_s < 0:
            raise QuotaError(f"warmup must be >= 0 seconds, not {warmup_s:g}")
        return cls(kind, target, rate, burst, warmup_s)

    def matches(self, name: str) -> bool:
        return name == self.target or (self.target.endswith("*")
                                       and name.startswith(self.target[:-1]))

    def to_dict(self) -> dict:
        return asdict(self)


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QuotaError(f"{what} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise QuotaError(f"{what} must be finite, not {value}")
    return float(value)


class TokenBucket:
    """Rate and burst, with the optional warm-up; all times from the caller's clock.

    `take` is on every send of a quota'd topic or group: the plain bucket's path is
    a handful of float operations on slots (the admission goal is <= 2 µs a send)."""

    __slots__ = ("quota", "name", "rate", "burst", "tokens", "last", "cold_from", "last_send")

    def __init__(self, quota: Quota, now: float, name: str = "") -> None:
        self.quota, self.name = quota, name
        self.rate, self.burst = quota.rate, quota.burst
        self.cold_from = now  # the warm-up runs from here
        self.last = self.last_send = now
        self.tokens = self._cap(now)

    def rate_at(self, now: float) -> float:
        q = self.quota
        if not q.warmup_s:
            return q.rate
        warm = min(1.0, (now - self.cold_from) / q.warmup_s)
        return q.rate * (1.0 / COLD_FACTOR + (1.0 - 1.0 / COLD_FACTOR) * warm)

    def _cap(self, now: float) -> float:
        # a warming bucket holds proportionally fewer tokens: no full burst at a cold start
        return max(1.0, self.burst * self.rate_at(now) / self.rate)

    def take(self, n: int, now: float) -> float:
        """Take `n` tokens and return 0.0, or take nothing and return the seconds until
        they are there. A batch bigger than the bucket passes when it is full (the
        tokens go below zero: paid back before the next send)."""
        if self.quota.warmup_s:
            return self._take_warming(n, now)
        tokens = self.tokens + (now - self.last) * self.rate
        if tokens > self.burst:
            tokens = self.burst
        self.last = now
        need = n if n < self.burst else self.burst
        if tokens >= need:
            self.tokens = tokens - n
            self.last_send = now
            return 0.0
        self.tokens = tokens
        return (need - tokens) / self.rate

    def _take_warming(self, n: int, now: float) -> float:
        if now - self.last_send >= self.quota.warmup_s:
            self.cold_from = now  # idle for a warm-up period: cold again
            self.tokens = min(self.tokens, self._cap(now))
        cap, rate = self._cap(now), self.rate_at(now)
        self.tokens = min(cap, self.tokens + max(0.0, now - self.last) * rate)
        self.last = now
        need = min(float(n), cap)
        if self.tokens >= need:
            self.tokens -= n
            self.last_send = now
            return 0.0
        return (need - self.tokens) / rate

    def refund(self, n: int) -> None:
        """Give back what `take` took (another quota refused the same send)."""
        self.tokens += n


class FlowControl:
    """The broker's quotas and their buckets; `admit` is on the send path."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self.quotas: dict[tuple[str, str], Quota] = {}
        try:
            for kind, targets in read_json(path).items():
                for target, spec in dict(targets).items():
                    q = Quota.make(kind, target, spec.get("rate"), spec.get("burst"),
                                   spec.get("warmup_s", 0.0))
                    self.quotas[(kind, target)] = q
        except (QuotaError, AttributeError, TypeError, ValueError) as exc:
            raise BrokerError(f"{path}: bad quota ({exc}); fix it or move it aside") from None
        self._buckets: dict[tuple[str, str], TokenBucket | None] = {}  # (kind, name) -> bucket
        self.throttled: dict[tuple[str, str], int] = {}  # (topic, group) -> refused sends
        self._pairs: dict[tuple[str, str], tuple[TokenBucket, ...]] = {}  # (topic, group)
        self._refused: TokenBucket | None = None  # the bucket of the last refusal

    @property
    def active(self) -> bool:
        return bool(self.quotas)

    # -- the send path --------------------------------------------------------------
    def admit(self, topic: str, group: str, n: int = 1) -> float:
        """0.0 when `n` messages of `topic` from `group` may be stored now (their tokens
        are taken), else the seconds until they may (nothing taken; counted)."""
        key = (topic, group)
        buckets = self._pairs.get(key)
        if buckets is None:
            buckets = self._resolve(key)
        if not buckets:
            return 0.0
        now = self.clock()
        first = buckets[0]
        wait = first.take(n, now)
        if not wait and len(buckets) > 1:
            wait = buckets[1].take(n, now)
            if wait:
                first.refund(n)
                first = buckets[1]
        if wait:
            self._refused = first
            self.throttled[key] = self.throttled.get(key, 0) + n
        return wait

    def _resolve(self, key: tuple[str, str]) -> tuple[TokenBucket, ...]:
        """The buckets a (topic, group) pair's sends take from, cached per pair."""
        if len(self._pairs) >= MAX_PAIRS:  # names that come and go: start the cache over
            self._pairs.clear()
        now = self.clock()
        found = tuple(b for b in (self._bucket("topic", key[0], now),
                                  self._bucket("group", key[1], now)) if b is not None)
        self._pairs[key] = found
        return found

    def _bucket(self, kind: str, name: str, now: float) -> TokenBucket | None:
        key = (kind, name)
        try:
            return self._buckets[key]
        except KeyError:
            pass
        quota = self.quotas.get(key) or max(
            (q for (k, _t), q in self.quotas.items() if k == kind and q.matches(name)),
            key=lambda q: len(q.target), default=None)
        bucket = self._buckets[key] = TokenBucket(quota, now, name) if quota else None
        return bucket

    def reason(self) -> str:
        """Which quota refused the last refused send (the FLOW_CONTROL answer's text)."""
        b = self._refused
        if b is None:
            return "over quota"
        q = b.quota
        return (f"{q.kind} {b.name} over its quota of {b.rate_at(self.clock()):,.0f} msgs/s"
                + (f" (rule {q.target})" if q.target != b.name else ""))

    # -- administration -------------------------------------------------------------
    def set(self, quota: Quota) -> None:
        self.quotas[(quota.kind, quota.target)] = quota
        self._changed()

    def clear(self, kind: str | None = None, target: str | None = None) -> int:
        """Remove matching quotas (all when neither is given); how many went."""
        gone = [k for k in self.quotas
                if (kind is None or k[0] == kind) and (target is None or k[1] == target)]
        for k in gone:
            del self.quotas[k]
        if gone:
            self._changed()
        return len(gone)

    def _changed(self) -> None:
        self._buckets.clear()  # re-resolved (and cold) on the next send
        self._pairs.clear()
        nested: dict[str, dict] = {}
        for (kind, target), q in sorted(self.quotas.items()):
            nested.setdefault(kind, {})[target] = {"rate": q.rate, "burst": q.burst,
                                                   "warmup_s": q.warmup_s}
        write_json_atomic(self.path, nested)

    def describe(self) -> dict:
        """Quotas in force (with each live bucket's rate now) and refusals so far."""
        now = self.clock()
        live: dict[tuple[str, str], list[dict]] = {}
        for (kind, name), b in self._buckets.items():
            if b is not None:
                live.setdefault((kind, b.quota.target), []).append(
                    {"name": name, "rate_now": round(b.rate_at(now), 3)})
        return {
            "quotas": [{**q.to_dict(), "buckets": live.get(k, [])}
                       for k, q in sorted(self.quotas.items())],
            "throttled": [{"topic": t, "group": g, "count": c}
                          for (t, g), c in sorted(self.throttled.items())],
            "throttled_total": sum(self.throttled.values()),
        }
