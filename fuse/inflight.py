"""Calls in flight, judged before they return.

`Fuse.begin` stores `call id -> (broker, start)` in a plain dict. Call ids
grow with start time and dicts keep insertion order, so the first entry is
always the oldest call still in flight: a scan for calls older than the slow
line stops at the first one that is not, and costs O(1) when none is. Single
dict operations are atomic under the GIL, so `begin`/`end` never lock; a
popped entry tells `end` that the call was already judged.
"""

from __future__ import annotations


def pop_overdue(inflight: dict[int, tuple[str, float]], started_before: float,
                ) -> dict[str, tuple[int, float]]:
    """Remove calls that started at or before `started_before`, oldest first.

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
        if inflight.pop(call_id, None) is not None:
            calls, oldest = overdue.get(broker, (0, start))
            overdue[broker] = (calls + 1, oldest)
    return overdue
