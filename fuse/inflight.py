"""Calls in flight, judged before they return.

`Fuse.begin` stores `call id -> (broker, start)` in a plain dict. Call ids
grow with start time and dicts keep insertion order, so the first entry is
always the oldest call still in flight: a scan for calls older than the slow
line stops at the first one that is not, and costs O(1) when none is. Calls
past the line move to a second dict, scanned the same way against twice the
line. Single dict operations are atomic under the GIL, so `begin`/`end`
never lock; where `end` finds its call tells it how often it was counted.
"""

from __future__ import annotations


def pop_overdue(inflight: dict[int, tuple[str, float]], started_before: float,
                move_to: dict[int, tuple[str, float]] | None = None,
                ) -> dict[str, tuple[int, float]]:
    """Remove calls that started at or before `started_before`, oldest first,
    into `move_to` if given (which then stays ordered by start too).

    Returns broker -> (calls removed, start of its oldest one).
    """
    overdue: dict[str, tuple[int, float]] = {}
    while True:
        try:
            call_id, (broker, start) = next(iter(inflight.items()))
        except (StopIteration, RuntimeError):  # empty, or resized by another thread
            break
        if start > started_before:
            break
        entry = inflight.pop(call_id, None)
        if entry is not None:
            if move_to is not None:
                move_to[call_id] = entry
            calls, oldest = overdue.get(broker, (0, start))
            overdue[broker] = (calls + 1, oldest)
    return overdue
