"""Simulated brokers and the fault scenarios the policies are compared on.

A healthy broker answers in a log-normal time (median 0.6 ms, sigma 0.5)
times a load factor 1 / (1 - rho), with rho its arrivals over the previous
100 ms against a capacity where a fair share is rho = 0.4: median ~1 ms,
p999 ~5 ms, and the brokers left serving get slower when others are excluded
(which is why the cap exists). Faults are episodes on a broker's timeline,
drawn from the seed before the run so every policy meets the same faults;
they begin after a healthy warm-up (10 % of the run, at most 30 s).

Episode kinds, on a broker:
- ``stall``: the broker answers nothing until the episode ends (PageCache
  lock, GC): calls in flight or arriving are held until then.
- ``down``: the host is gone; calls hang until the producer's send timeout.
- ``slow``: RT multiplied by ``factor``.
- ``errors``: a fraction ``p`` of calls fail fast (broker busy, flush fail).
- ``lossy``: packet loss: calls take 50-500 ms and 20 % of them fail.

and on the producer's side (keys `CLIENT` and `HOST` of a scenario's episodes):
- ``pause``: the client itself cannot run (its event loop busy, its thread
  waiting for the GIL or a core): nothing is sent, read or judged until the
  pause ends, and its heartbeat is late by that much.
- ``contention``: the host shared by brokers and client is short of CPU: half
  the calls wait up to ``value`` seconds more at random (the broker process was
  not scheduled), on every broker at once, none past the episode's end.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from dataclasses import dataclass

from fuse.errors import FuseError

BASE_MU = math.log(0.0006)
BASE_SIGMA = 0.5
NOMINAL_RHO = 0.4
LOAD_WINDOW_S = 0.1
CLIENT = -1  # episodes of the producer itself
HOST = -2  # episodes of the host every broker shares


@dataclass(frozen=True, slots=True)
class Episode:
    start: float
    end: float
    kind: str  # stall | down | slow | errors | lossy
    value: float = 0.0  # factor for slow, p for errors


class Cluster:
    """N simulated brokers; `attempt` says how long a call takes and whether it fails."""

    def __init__(self, brokers: int, rate: float, episodes: dict[int, list[Episode]],
                 rng: random.Random) -> None:
        self.n = brokers
        self._rng = rng
        self.faulted = frozenset(b for b in range(brokers) if episodes.get(b))
        self.pauses = sorted(episodes.get(CLIENT, ()), key=lambda e: e.start)
        self._contention = sorted(episodes.get(HOST, ()), key=lambda e: e.start)
        self._contention_starts = [e.start for e in self._contention]
        self._episodes = [sorted(episodes.get(b, ()), key=lambda e: e.start)
                          for b in range(brokers)]
        self._starts = [[e.start for e in eps] for eps in self._episodes]
        capacity = rate / brokers / NOMINAL_RHO  # calls per second a broker absorbs
        self._per_window = capacity * LOAD_WINDOW_S
        self._window = [0] * brokers
        self._count = [0] * brokers
        self._last = [rate / brokers * LOAD_WINDOW_S] * brokers

    def _load_factor(self, b: int, t: float) -> float:
        window = int(t / LOAD_WINDOW_S)
        if window != self._window[b]:
            self._last[b] = self._count[b] if window == self._window[b] + 1 else 0
            self._window[b] = window
            self._count[b] = 0
        self._count[b] += 1
        rho = min(self._last[b] / self._per_window, 0.9)
        return 1.0 / (1.0 - rho)

    def attempt(self, b: int, t: float) -> tuple[float, bool]:
        """(duration, ok) of a call to broker `b` starting at `t`; duration may be inf."""
        rng = self._rng
        rt = rng.lognormvariate(BASE_MU, BASE_SIGMA) * self._load_factor(b, t)
        if self._contention_starts:
            i = bisect_right(self._contention_starts, t) - 1
            busy = self._contention[i] if i >= 0 else None
            if busy is not None and t < busy.end and rng.random() < 0.5:
                # waits for a core, at most until the host has cores again
                rt += min(rng.uniform(0.0, busy.value), busy.end - t)
        starts = self._starts[b]
        if not starts:
            return rt, True
        i = bisect_right(starts, t) - 1
        eps = self._episodes[b]
        if i >= 0 and t < eps[i].end:
            ep = eps[i]
            kind = ep.kind
            if kind == "slow":
                return rt * ep.value, True
            if kind == "errors":
                return rt, rng.random() >= ep.value
            if kind == "stall":
                return ep.end - t + rt, True
            if kind == "down":
                return math.inf, False
            if kind == "lossy":
                return rng.uniform(0.05, 0.5), rng.random() >= 0.2
        # A stall that begins before this call is answered holds it too.
        if i + 1 < len(eps):
            nxt = eps[i + 1]
            if nxt.kind == "stall" and nxt.start < t + rt:
                return nxt.end - t + (t + rt - nxt.start), True
        return rt, True


def _onset(seconds: float) -> float:
    return min(30.0, seconds * 0.1)


def _pagecache_stall(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Broker 0 stalls 200-2000 ms, every few seconds (gaps: exponential, mean 5 s)."""
    episodes, t = [], _onset(seconds)
    while t < seconds:
        length = rng.uniform(0.2, 2.0)
        episodes.append(Episode(t, t + length, "stall"))
        t += length + rng.expovariate(1 / 5.0)
    return {0: episodes}


def _erroring(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Broker 0 fails 5 % of its calls, fast."""
    return {0: [Episode(_onset(seconds), math.inf, "errors", 0.05)]}


def _flapping(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Broker 0: 5 s of packet loss (50-500 ms calls, 20 % fail), then 20 s fine, again."""
    episodes, t = [], _onset(seconds)
    while t < seconds:
        episodes.append(Episode(t, t + 5.0, "lossy"))
        t += 25.0
    return {0: episodes}


def _half_slow(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Half the brokers answer 20x slower (median ~20 ms): more than the cap can take out."""
    return {b: [Episode(_onset(seconds), math.inf, "slow", 20.0)] for b in range(n // 2)}


def _cluster_slow(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Every broker 3x slower: nothing to isolate, the fuse should stay out of the way."""
    return {b: [Episode(_onset(seconds), math.inf, "slow", 3.0)] for b in range(n)}


def _outage(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Broker 0's host is down (calls hang to the send timeout) from 10 % to 70 % of the run."""
    return {0: [Episode(_onset(seconds), seconds * 0.7, "down")]}


def _client_pause(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """Broker 0 stalls as in pagecache-stall, while the producer itself pauses 5-50 ms
    about 4 times a second (its loop or GIL busy, ~11 % of the time) and the shared
    host is short of CPU for 20-100 ms every ~2 s (calls wait up to 30 ms more)."""
    episodes = _pagecache_stall(n, seconds, rng)
    pauses, t = [], rng.expovariate(4.0)
    while t < seconds:
        length = rng.uniform(0.005, 0.050)
        pauses.append(Episode(t, t + length, "pause"))
        t += length + rng.expovariate(4.0)
    busy, t = [], rng.expovariate(0.5)
    while t < seconds:
        length = rng.uniform(0.02, 0.10)
        busy.append(Episode(t, t + length, "contention", 0.030))
        t += length + rng.expovariate(0.5)
    return {**episodes, CLIENT: pauses, HOST: busy}


def _healthy(n: int, seconds: float, rng: random.Random) -> dict[int, list[Episode]]:
    """No fault: what each policy costs when nothing is wrong."""
    return {}


SCENARIOS = {
    "pagecache-stall": _pagecache_stall,
    "erroring": _erroring,
    "flapping": _flapping,
    "half-slow": _half_slow,
    "cluster-slow": _cluster_slow,
    "outage": _outage,
    "client-pause": _client_pause,
    "healthy": _healthy,
}


def describe(name: str) -> str:
    return (SCENARIOS[name].__doc__ or "").strip()


def build_cluster(name: str, brokers: int, seconds: float, rate: float, seed: int) -> Cluster:
    if name not in SCENARIOS:
        raise FuseError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    faults = SCENARIOS[name](brokers, seconds, random.Random(f"{seed}:faults:{name}"))
    return Cluster(brokers, rate, faults, random.Random(f"{seed}:rt"))
