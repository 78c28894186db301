"""Calls in flight, judged before they return.

`Fuse.begin` stores `call id -> (broker, start)` in a plain dict. Call ids
grow with start time and dicts keep insertion order, so the first entry is
always the oldest call still in flight: a scan for calls older than a line
stops at the first one that is not, and costs O(1) when none is.

A call climbs the stages as it ages (in time the client was watching):
fresh, past the slow line, past twice the line, stuck (past `stuck_factor`
lines) and hung (past `hung_factor` lines), where it stays until it returns. Single dict operations are atomic under the GIL, so `begin` and
`end` never lock; the stage `end` finds its call in says how often
housekeeping already counted it (`LEVEL_COUNTS`).
"""

from __future__ import annotations

Calls = dict[int, tuple[str, float]]

# Offences housekeeping charged for a call found in stage i (4: hung, or forgotten).
LEVEL_COUNTS = (0, 1, 2, 3, 4)


def pop_overdue(calls: Calls, started_before: float, move_to: Calls | None = None,
                ) -> dict[str, tuple[int, float]]:
    """Remove calls that started at or before `started_before`, oldest first,
    into `move_to` if given (which then stays ordered by start too).

    Returns broker -> (calls removed, start of its oldest one).
    """
    overdue: dict[str, tuple[int, float]] = {}
    while True:
        try:
            call_id, (broker, start) = next(iter(calls.items()))
        except (StopIteration, RuntimeError):  # empty, or resized by another thread
            break
        if start > started_before:
            break
        entry = calls.pop(call_id, None)
        if entry is not None:
            if move_to is not None:
                move_to[call_id] = entry
            n, oldest = overdue.get(broker, (0, start))
            overdue[broker] = (n + 1, oldest)
    return overdue


class InflightCalls:
    """The stages, each a dict ordered by start; the hot path uses them directly."""

    def __init__(self) -> None:
        self.fresh: Calls = {}
        self.past_line: Calls = {}
        self.past_twice: Calls = {}
        self.stuck: Calls = {}
        self.hung: Calls = {}
        self._stages = (self.fresh, self.past_line, self.past_twice, self.stuck, self.hung)

    def __len__(self) -> int:
        return sum(len(stage) for stage in self._stages)

    def level(self, call_id: int) -> int:
        """Remove a returning call; the stage it was in (4: hung or unknown)."""
        for level, stage in enumerate(self._stages[:-1]):
            if stage.pop(call_id, None) is not None:
                return level
        self.hung.pop(call_id, None)
        return 4

    def forget(self, call_id: int) -> None:
        for stage in self._stages:
            stage.pop(call_id, None)

    def drop(self, broker: str) -> None:
        """Forget every call in flight to `broker` (removed: a rare path)."""
        for stage in self._stages:
            for call_id, (name, _start) in list(stage.items()):  # a copy: begin() adds
                if name == broker:
                    stage.pop(call_id, None)

    def climb(self, cutoffs: tuple[float, ...]) -> tuple[dict[str, tuple[int, float]], ...]:
        """Move calls up a stage where they started before that stage's cutoff (past
        the line, past twice the line, stuck, hung); per stage reached: broker ->
        (calls, oldest start)."""
        # youngest stage first, so a call may climb all of them in one pass
        return tuple(pop_overdue(low, cut, move_to=high)
                     for low, high, cut in zip(self._stages[:-1], self._stages[1:], cutoffs,
                                               strict=True))

    def started_before(self, cut: float) -> dict[str, int]:
        """Calls in flight that started before `cut`, per broker (a rare-path scan)."""
        out: dict[str, int] = {}
        for stage in self._stages:
            for broker, start in tuple(stage.values()):  # oldest first
                if start > cut:
                    break
                out[broker] = out.get(broker, 0) + 1
        return out
