"""The threaded producer's one helper thread (client.producer).

It fails requests past their deadline, sends again what waited out a FLOW_CONTROL
backoff, and ticks the fuse (judging calls still in flight) every SWEEP_S, but
only while a call is in flight or a retry waits: otherwise it sleeps until the
next call (it woke 50 times a second in every producer that had ever sent).

Its wake-ups are also the producer's heartbeat: when this thread runs late, so
do the threads reading answers (same GIL, same cores), and the fuse does not
hold that time against the brokers (fuse.lateness). Asleep, it tells the fuse
it rests: the quiet time is nobody's lateness.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future

SWEEP_S = 0.02

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
        self._calling = threading.Event()  # a call began: there is work
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the producer tells it ------------------------------------------------------
    def watch(self, fut: Future, conn, timeout: float) -> None:
        """A request in flight on `conn`: failed with TimeoutError after `timeout`."""
        with self._lock:
            self._deadlines[fut] = (self._clock() + timeout, conn, timeout)
        self.wake()

    def answered(self, fut: Future) -> None:
        with self._lock:
            self._deadlines.pop(fut, None)

    def later(self, wait_s: float, plan, payload: bytes, outer: Future) -> None:
        with self._lock:
            heapq.heappush(self._later, (self._clock() + wait_s, next(self._ids), plan,
                                         payload, outer))
        self.wake()

    def wake(self) -> None:
        """A call began (a blocking one too: the fuse judges it while in flight)."""
        if self._thread is None:
            self._start()
        if not self._calling.is_set():
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

    def _idle(self) -> bool:
        with self._lock:
            if self._deadlines or self._later:
                return False
        return self.fuse is None or not self.fuse.calls_in_flight

    def _run(self) -> None:
        while not self._closed.is_set():
            self._calling.clear()  # before looking: a call from here on wakes it
            if self._idle():
                if self.fuse is not None:
                    self.fuse.rest()
                self._calling.wait()
                continue
            if self._closed.wait(SWEEP_S):
                return
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
