"""The threaded producer's one helper thread (client.producer).

It fails requests past their deadline, sends again what waited out a FLOW_CONTROL
backoff, and ticks the fuse (judging calls still in flight) every SWEEP_S while the
fuse has a call in flight. Otherwise it sleeps until the first deadline or retry is
due, or until the next call (it woke 50 times a second in every producer that had
ever sent, and in a producer without a fuse that waited out backoffs: the demo's
flood, throttled by its quota, woke it 56 times a second for one retry due a second
later).

Its wake-ups are also the producer's heartbeat: when this thread runs late, so
do the threads reading answers (same GIL, same cores), and the fuse does not
hold that time against the brokers (fuse.lateness). Asleep, it tells the fuse
it rests: the quiet time is nobody's lateness.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future

SWEEP_S = 0.02
# The longest it sleeps with work pending: its deadlines are on the producer's clock,
# which may not be the wall's (an injected one moves while it sleeps)
MAX_SLEEP_S = 0.5

Retry = tuple[object, bytes, Future]  # (plan, payload, outer future)


class CallSweeper:
    """`retry(plan, payload, outer)`: send again once a backoff is over."""

    def __init__(self, fuse, clock: Callable[[], float],
                 retry: Callable[[object, bytes, Future], None]) -> None:
        self.fuse, self._clock, self._retry = fuse, clock, retry
        self._deadlines: dict[Future, tuple[float, object, float]] = {}  # fut: (t, conn, s)
        self._later: list[tuple[float, int, object, bytes, Future]] = []  # a heap
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._calling = threading.Event()  # a call began, or work due before _until
        self._until = math.inf  # when the thread wakes by itself (inf: only when called)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the producer tells it ------------------------------------------------------
    def watch(self, fut: Future, conn, timeout: float) -> None:
        """A request in flight on `conn`: failed with TimeoutError after `timeout`."""
        at = self._clock() + timeout
        with self._lock:
            self._deadlines[fut] = (at, conn, timeout)
        self._due(self._clock() + SWEEP_S if self.fuse is not None else at)

    def answered(self, fut: Future) -> None:
        with self._lock:
            self._deadlines.pop(fut, None)

    def later(self, wait_s: float, plan, payload: bytes, outer: Future) -> None:
        at = self._clock() + wait_s
        with self._lock:
            heapq.heappush(self._later, (at, next(self._ids), plan, payload, outer))
        self._due(at)

    def wake(self) -> None:
        """A call began (a blocking one too: the fuse judges it while in flight)."""
        if self.fuse is not None:
            self._due(self._clock() + SWEEP_S)

    def _due(self, at: float) -> None:
        """Work is due at `at`: the thread is woken if it would sleep past it (a call
        that only adds a deadline after the first one costs no wake-up)."""
        if self._thread is None:
            self._start()
        if at < self._until and not self._calling.is_set():
            self._calling.set()

    def close(self) -> list[Retry]:
        """Stop; the retries that were still waiting (never sent)."""
        self._closed.set()
        self._calling.set()
        with self._lock:
            waiting, self._later = self._later, []
        return [(plan, payload, outer) for _t, _i, plan, payload, outer in waiting]

    # -- the thread --------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="floodgate-producer-timeouts")
                self._thread.start()

    def _wait_s(self) -> float:
        """How long the thread may sleep: SWEEP_S while the fuse judges a call in
        flight, else until the first deadline or retry, at most MAX_SLEEP_S (inf: none
        pending)."""
        if self.fuse is not None and self.fuse.calls_in_flight:
            return SWEEP_S
        with self._lock:
            first = min((d for d, _c, _s in self._deadlines.values()), default=math.inf)
            if self._later:
                first = min(first, self._later[0][0])
        if first == math.inf:
            return first
        return min(MAX_SLEEP_S, max(0.0, first - self._clock()))

    def _run(self) -> None:
        while not self._closed.is_set():
            self._calling.clear()  # before looking: a call from here on wakes it
            wait = self._wait_s()
            if wait > SWEEP_S and self.fuse is not None:
                self.fuse.rest()  # the beats stop on purpose: the quiet is no lateness
            self._until = self._clock() + wait
            woken = self._calling.wait(None if wait == math.inf else wait)
            self._until = math.inf
            if not woken:
                self.sweep()

    def sweep(self) -> None:
        if self.fuse is not None:
            self.fuse.heartbeat(SWEEP_S)
            # judge calls still in flight: a broker stuck on a call is slow now, not
            # when (if ever) the call returns
            self.fuse.tick()
        now = self._clock()
        with self._lock:
            late = [(f, c, s) for f, (d, c, s) in self._deadlines.items() if d <= now]
            for f, _c, _s in late:
                del self._deadlines[f]
            due = []
            while self._later and self._later[0][0] <= now:
                due.append(heapq.heappop(self._later))
        for _at, _id, plan, payload, outer in due:
            self._retry(plan, payload, outer)
        for fut, conn, timeout in late:
            conn.forget(fut)
            if not fut.done():
                try:
                    fut.set_exception(TimeoutError(f"{conn.addr}: no answer in {timeout:g} s"))
                except Exception:  # noqa: BLE001 - answered at the same moment
                    pass
