"""A deterministic virtual-time simulation of a producer stream over N brokers.

`simulate(scenario, policy, brokers=10, seconds=600, rate=10000, seed=0)`
sends Poisson arrivals at `rate` per second for `seconds` of virtual time.
Each send is a RocketMQ synchronous send: up to 3 attempts
(retryTimesWhenSendFailed = 2) within one 3 s send timeout; a failed
attempt is retried on another broker while time is left. The policy picks
the broker of each attempt and hears of each attempt's start and end at the
right virtual instants, so in-flight judgement works as in a real producer.
Same arguments, same seed -> the same result, to the last digit.

The producer beats its heartbeat every 5 ms (`fuse.lateness`). In scenarios
where the client pauses, nothing happens on its side during a pause: sends
wait, answers wait to be read, the heartbeat is late; at the pause's end the
answers are read first, then the timers run (asyncio's order), as in a real
producer.

Results per run: share of sends over 20 ms (`share_over_20ms`, a fraction,
counted exactly), average and p999 send RT (over all sends, failed ones
included at the time they gave up), sends failed after retries, the most
brokers ever excluded (sampled every 10 ms), and isolations of brokers that
had no fault (`false_isolations`: each one takes a healthy broker out).
"""

from __future__ import annotations

import heapq
import math
import random
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import asdict, dataclass

from fuse.errors import FuseError
from fuse.sim_policies import POLICIES, Policy
from fuse.sim_scenarios import SCENARIOS, build_cluster
from heatmap.sla import SLA_MAX_S

SEND_TIMEOUT_S = 3.0
MAX_ATTEMPTS = 3
SAMPLE_EXCLUDED_S = 0.01
HEARTBEAT_S = 0.005  # as broker_core's asyncio producer
MAX_SENDS = 20_000_000


@dataclass(frozen=True)
class SimResult:
    scenario: str
    policy: str
    brokers: int
    seconds: float
    rate: float
    seed: int
    sends: int
    over_20ms: int
    share_over_20ms: float
    avg_rt_ms: float
    p999_ms: float
    max_rt_ms: float
    failed: int
    attempts: int
    max_excluded: int
    max_excluded_ratio: float
    isolations: int = 0
    false_isolations: int = 0  # isolations of brokers with no fault episode

    def to_dict(self) -> dict:
        return asdict(self)


class _Clock:
    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _p999(values: array) -> float:
    if not values:
        return 0.0
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a floodgate dependency
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, math.ceil(0.999 * len(ordered)) - 1)]
    return float(np.quantile(np.frombuffer(values, dtype=np.float64), 0.999,
                             method="inverted_cdf"))


def check_args(scenario: str, policy: str, brokers: int, seconds: float, rate: float) -> None:
    if scenario not in SCENARIOS:
        raise FuseError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    if policy not in POLICIES:
        raise FuseError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    if not isinstance(brokers, int) or not 1 <= brokers <= 10_000:
        raise FuseError(f"brokers must be an integer in [1, 10000], got {brokers!r}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise FuseError(f"seconds must be > 0, got {seconds!r}")
    if not (math.isfinite(rate) and rate > 0):
        raise FuseError(f"rate must be > 0, got {rate!r}")
    if seconds * rate > MAX_SENDS:
        raise FuseError(f"seconds x rate = {seconds * rate:.0f} sends; at most {MAX_SENDS} per run")


def simulate(scenario: str, policy: str, brokers: int = 10, seconds: float = 600.0,
             rate: float = 10_000.0, seed: int = 0,
             progress: Callable[[float], None] | None = None,
             **fuse_options: float) -> SimResult:
    """Run one scenario under one policy; `fuse_options` tune the `fuse` policy.

    `progress(done)` is called with the fraction of virtual time sent so far,
    once per virtual second.
    """
    check_args(scenario, policy, brokers, seconds, rate)
    clock = _Clock()
    cluster = build_cluster(scenario, brokers, seconds, rate, seed)
    if policy == "fuse":
        chooser: Policy = POLICIES[policy](brokers, clock, seed, **fuse_options)
    else:
        chooser = POLICIES[policy](brokers, clock, seed)
    arrivals = random.Random(f"{seed}:arrivals")

    rts = array("d")
    over = failed = attempts = max_excluded = 0
    heap: list = []  # (finish time, seq, send start, attempt no, broker, token, ok)
    seq = 0
    next_sample = 0.0
    next_progress = 1.0 if progress is not None else math.inf

    def start_attempt(now: float, send_start: float, attempt: int, avoid: int | None) -> None:
        nonlocal seq, attempts, over, failed
        attempts += 1
        broker = chooser.choose(avoid)
        deadline = send_start + SEND_TIMEOUT_S
        if broker is None:  # the policy refuses every broker (all breakers open)
            finish, ok, token, broker = now, False, None, -1
        else:
            token = chooser.begin(broker)
            duration, ok = cluster.attempt(broker, now)
            finish = now + duration
            if finish > deadline:  # the send timeout fires first
                finish, ok = deadline, False
        seq += 1
        heapq.heappush(heap, (finish, seq, send_start, attempt, broker, token, ok, now))

    pauses = cluster.pauses
    pause_starts = [p.start for p in pauses]

    def after_pauses(t: float) -> float:
        """When the client can act on something due at `t`."""
        i = bisect_right(pause_starts, t) - 1
        return pauses[i].end if i >= 0 and t < pauses[i].end else t

    next_beat = HEARTBEAT_S

    def beats_before(t: float) -> None:
        """The heartbeat timer's runs before `t`: on time, or late at a pause's end."""
        nonlocal next_beat
        while (at := after_pauses(next_beat)) < t:
            clock.now = at
            chooser.beat(HEARTBEAT_S)
            next_beat = at + HEARTBEAT_S

    next_arrival = arrivals.expovariate(rate)
    while next_arrival < seconds or heap:
        due = after_pauses(next_arrival) if next_arrival < seconds else math.inf
        if heap and (done := after_pauses(heap[0][0])) <= due:  # answers before timers
            beats_before(done)
            _, _, send_start, attempt, broker, token, ok, began = heapq.heappop(heap)
            clock.now = done
            if broker >= 0:
                chooser.end(broker, token, done - began, ok)
            if not ok and attempt + 1 < MAX_ATTEMPTS and done < send_start + SEND_TIMEOUT_S:
                start_attempt(done, send_start, attempt + 1, broker if broker >= 0 else None)
                continue
            rt = done - send_start
            rts.append(rt)
            if rt > SLA_MAX_S:
                over += 1
            if not ok:
                failed += 1
        else:
            beats_before(due)
            now = clock.now = due
            if now >= next_sample:
                next_sample = now + SAMPLE_EXCLUDED_S
                max_excluded = max(max_excluded, chooser.excluded())
                if now >= next_progress:
                    next_progress += 1.0
                    progress(now / seconds)  # type: ignore[misc]
            start_attempt(now, next_arrival, 0, None)
            next_arrival += arrivals.expovariate(rate)

    sends = len(rts)
    return SimResult(
        scenario=scenario, policy=policy, brokers=brokers, seconds=seconds, rate=rate,
        seed=seed, sends=sends, over_20ms=over,
        share_over_20ms=over / sends if sends else 0.0,
        avg_rt_ms=1000.0 * sum(rts) / sends if sends else 0.0,
        p999_ms=1000.0 * _p999(rts),
        max_rt_ms=1000.0 * max(rts, default=0.0),
        failed=failed, attempts=attempts, max_excluded=max_excluded,
        max_excluded_ratio=max_excluded / brokers,
        isolations=sum(chooser.isolations(b) for b in range(brokers)),
        false_isolations=sum(chooser.isolations(b) for b in range(brokers)
                             if b not in cluster.faulted),
    )


def simulate_matrix(scenarios: list[str], policies: list[str], **kwargs) -> list[SimResult]:
    return [simulate(s, p, **kwargs) for s in scenarios for p in policies]
