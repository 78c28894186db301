"""A job on the event loop that runs when it is due, never at a fixed rate.

Idle means idle: a broker with nothing to do should not wake. Each periodic pass
(delayed delivery, transaction check-backs, the parked sends' timeouts, a link's
heartbeat) asks for a run by the time its next piece of work falls due; after a
run nothing is armed unless the run says when it is due next, or new work asks
again. One loop timer per job, armed for the earliest time asked.

The lateness of every run (how long after its time it ran) is what the loop's
lag is measured from where the loop works anyway (`observe.loop_lag`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("floodgate.broker")


class Deadline:
    """`run()` does the job and returns in how many seconds it is due next, or None
    when nothing is pending. `late(seconds)`: told how late each run was."""

    def __init__(self, run: Callable[[], float | None], name: str,
                 late: Callable[[float], object] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._run, self.name, self._late = run, name, late
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None
        self.when: float | None = None  # the time armed for, None when not armed
        self.runs = 0
        self.closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def time(self) -> float:
        return self.loop.time()

    def at(self, when: float) -> None:
        """Run by `when` (loop time): an earlier time than the one armed re-arms."""
        if self.closed or (self.when is not None and self.when <= when):
            return
        if self._handle is not None:
            self._handle.cancel()
        self.when = when
        self._handle = self.loop.call_at(when, self._fire)

    def after(self, delay_s: float) -> None:
        self.at(self.time() + max(0.0, delay_s))

    def soon(self) -> None:
        """Run at the next turn of the loop."""
        self.at(self.time())

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self.when = None

    def close(self) -> None:
        self.cancel()
        self.closed = True

    def _fire(self) -> None:
        due, self._handle, self.when = self.when, None, None
        now = self.time()
        if self._late is not None and due is not None:
            self._late(max(0.0, now - due))
        self.runs += 1
        try:
            nxt = self._run()
        except Exception:  # noqa: BLE001 - logged; a job must outlive one bad run
            log.exception("%s failed; trying again in 1 s", self.name)
            nxt = 1.0
        if nxt is not None:
            self.at(now + max(0.0, nxt))
