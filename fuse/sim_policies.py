"""Broker-choice policies compared by the simulator, all on the virtual clock.

- ``none``: plain round robin; a retry skips the broker that just failed
  (RocketMQ's `selectOneMessageQueue(lastBrokerName)`).
- ``fuse``: our `Fuse`, driven through choose/begin/end like a producer would.
- ``rocketmq``: RocketMQ 4.x `MQFaultStrategy` with `sendLatencyFaultEnable`,
  modelled from its source (4.9): after every call `updateFaultItem(broker,
  latency, isolation)`; the broker is unavailable for the `notAvailableDuration`
  of the largest `latencyMax` step the latency reaches ({50, 100, 550, 1000,
  2000, 3000, 15000} ms -> {0, 0, 30, 60, 120, 180, 600} s); an exception
  counts as 30000 ms, i.e. 600 s. Choice: round robin over available brokers;
  if none, `pickOneAtLeast` (sort: available first, lower latency, earlier
  start; rotate over the better half). No cap; latency only known at return.
- ``pybreaker``: one breaker per broker as pybreaker 1.x does it (fail_max 5
  consecutive failures, reset_timeout 60 s, then one half-open trial call;
  success closes, failure reopens). Modelled, not imported: pybreaker reads
  `datetime.now()` and takes no clock, so it cannot run in virtual time. Its
  lock around the call itself (which serialises all calls to a broker) is
  not modelled: a half-open breaker lets only its trial through and the
  producer picks another broker. Only exceptions count, so slow calls never
  trip it; a send timeout is an exception. All breakers open: the attempt
  fails at once (CircuitBreakerError).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fuse.fuse import Fuse

Clock = Callable[[], float]


class Policy:
    name = "policy"

    def __init__(self, brokers: int, clock: Clock, seed: int) -> None:
        self.n = brokers
        self.clock = clock
        self._rr = 0

    def choose(self, avoid: int | None) -> int | None:
        raise NotImplementedError

    def begin(self, broker: int) -> object:
        return None

    def end(self, broker: int, token: object, rt: float, ok: bool) -> None:
        pass

    def excluded(self) -> int:
        return 0

    def beat(self, interval_s: float) -> None:
        """The client's heartbeat timer ran (only our fuse listens)."""

    def isolations(self, broker: int) -> int:
        """Times `broker` was taken out of service so far."""
        return 0

    def _next(self) -> int:
        self._rr += 1
        return self._rr % self.n


class RoundRobin(Policy):
    name = "none"

    def choose(self, avoid: int | None) -> int | None:
        b = self._next()
        if b == avoid and self.n > 1:
            b = self._next()
        return b


class FusePolicy(Policy):
    name = "fuse"

    def __init__(self, brokers: int, clock: Clock, seed: int, **options: float) -> None:
        super().__init__(brokers, clock, seed)
        self.names = [f"broker-{b}" for b in range(brokers)]
        self.index = {name: b for b, name in enumerate(self.names)}
        self.fuse = Fuse(self.names, clock=clock, seed=seed, **options)

    def choose(self, avoid: int | None) -> int | None:
        if avoid is None or self.n == 1:
            return self.index[self.fuse.choose()]
        return self.index[self.fuse.choose(self.names[:avoid] + self.names[avoid + 1:])]

    def begin(self, broker: int) -> object:
        return self.fuse.begin(self.names[broker])

    def end(self, broker: int, token: object, rt: float, ok: bool) -> None:
        self.fuse.end(token, ok)  # type: ignore[arg-type]

    def excluded(self) -> int:
        self.fuse.tick()
        return len(self.fuse.excluded)

    def beat(self, interval_s: float) -> None:
        self.fuse.heartbeat(interval_s)

    def isolations(self, broker: int) -> int:
        counts = self.fuse.snapshot(transitions=False).isolations_by_broker
        return counts.get(self.names[broker], 0)


LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_S = (0, 0, 30, 60, 120, 180, 600)


class RocketMQFaultStrategy(Policy):
    name = "rocketmq"

    def __init__(self, brokers: int, clock: Clock, seed: int) -> None:
        super().__init__(brokers, clock, seed)
        self.available_at = [-math.inf] * brokers
        self.latency_ms = [None] * brokers  # None: no fault item yet
        self._worst = 0
        self._isolations = [0] * brokers

    @staticmethod
    def not_available_s(latency_ms: float) -> float:
        for step in range(len(LATENCY_MAX_MS) - 1, -1, -1):
            if latency_ms >= LATENCY_MAX_MS[step]:
                return NOT_AVAILABLE_S[step]
        return 0.0

    def choose(self, avoid: int | None) -> int | None:
        now = self.clock()
        for _ in range(self.n):
            b = self._next()
            if now >= self.available_at[b]:
                return b
        items = [b for b in range(self.n) if self.latency_ms[b] is not None]
        items.sort(key=lambda b: (now < self.available_at[b], self.latency_ms[b],
                                  self.available_at[b]))
        half = len(items) // 2
        if half <= 0:
            return items[0] if items else self._next()
        self._worst += 1
        return items[self._worst % half]

    def end(self, broker: int, token: object, rt: float, ok: bool) -> None:
        latency_ms = rt * 1000.0 if math.isfinite(rt) else 30000.0
        self.latency_ms[broker] = latency_ms
        now = self.clock()
        was_available = now >= self.available_at[broker]
        self.available_at[broker] = now + self.not_available_s(latency_ms if ok else 30000.0)
        if was_available and now < self.available_at[broker]:
            self._isolations[broker] += 1

    def excluded(self) -> int:
        now = self.clock()
        return sum(1 for t in self.available_at if now < t)

    def isolations(self, broker: int) -> int:
        return self._isolations[broker]


class PyBreakerModel(Policy):
    name = "pybreaker"
    FAIL_MAX = 5
    RESET_TIMEOUT_S = 60.0

    def __init__(self, brokers: int, clock: Clock, seed: int) -> None:
        super().__init__(brokers, clock, seed)
        self.state = ["closed"] * brokers
        self.fails = [0] * brokers
        self.opened_at = [0.0] * brokers
        self.trial = [False] * brokers  # a half-open trial call is in flight
        self._opened = [0] * brokers

    def _permits(self, b: int, now: float) -> bool:
        state = self.state[b]
        if state == "closed":
            return True
        if state == "open" and now >= self.opened_at[b] + self.RESET_TIMEOUT_S:
            self.state[b] = "half-open"
            state = "half-open"
        return state == "half-open" and not self.trial[b]

    def choose(self, avoid: int | None) -> int | None:
        now = self.clock()
        for _ in range(self.n):
            b = self._next()
            if b != avoid and self._permits(b, now):
                if self.state[b] == "half-open":
                    self.trial[b] = True
                return b
        return None

    def begin(self, broker: int) -> object:
        return self.state[broker] == "half-open"

    def end(self, broker: int, token: object, rt: float, ok: bool) -> None:
        if token:  # the half-open trial
            self.trial[broker] = False
            if ok:
                self.state[broker], self.fails[broker] = "closed", 0
            else:
                self.state[broker], self.opened_at[broker] = "open", self.clock()
            return
        if ok:
            self.fails[broker] = 0
            return
        self.fails[broker] += 1
        if self.state[broker] == "closed" and self.fails[broker] >= self.FAIL_MAX:
            self.state[broker], self.opened_at[broker] = "open", self.clock()
            self._opened[broker] += 1

    def excluded(self) -> int:
        return sum(1 for s in self.state if s != "closed")

    def isolations(self, broker: int) -> int:
        return self._opened[broker]


POLICIES: dict[str, type[Policy]] = {
    "none": RoundRobin,
    "fuse": FusePolicy,
    "rocketmq": RocketMQFaultStrategy,
    "pybreaker": PyBreakerModel,
}
