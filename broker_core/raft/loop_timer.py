"""Timers on uvloop's millisecond clock that find their work due when they run.

uvloop's `time()` counts whole milliseconds and its `call_at` rounds a delay to one (a
delay under half a millisecond runs at the loop's next turn). A Raft core's due time
(now + 5 ms, a float sum) read back at that millisecond is below it a third of the
time: the tick found nothing due, armed again under a millisecond away, ran at once,
and so spun until the clock moved on: a leader at one send in flight ticked 3,130 times
a second where ~170 had work, a tenth to a third of its CPU at a few hundred sends a
second. Armed a millisecond late, a timer finds its work due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SLACK_S = 0.001


def call_when_due(loop: asyncio.AbstractEventLoop, due: float,
                  fn: Callable[[], object]) -> asyncio.Handle:
    """Run `fn` once the loop's clock has passed `due` (loop time)."""
    return loop.call_at(due + SLACK_S, fn)
