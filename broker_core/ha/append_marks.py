"""When each recent append reached a master's log, so that a slave's lag can be told in
seconds (the oldest append it has not acknowledged) and not in bytes only."""

from __future__ import annotations

import bisect

MAX_APPEND_MARKS = 200_000  # (end offset, time) pairs kept for lag in seconds


class AppendMarks:
    def __init__(self, floor: int) -> None:
        """`floor`: the log's end now: no marks below it (appended long ago)."""
        self.ends: list[int] = []  # end offsets of recent appends ...
        self.times: list[float] = []  # ... and when they were appended
        self.floor = floor

    def mark(self, end: int, now: float) -> None:
        self.ends.append(end)
        self.times.append(now)
        if len(self.ends) > MAX_APPEND_MARKS:
            self._cut(MAX_APPEND_MARKS // 2)

    def reset(self, floor: int) -> None:
        self.ends.clear()
        self.times.clear()
        self.floor = floor

    def oldest_unacked(self, acked: int) -> float | None:
        """When the first append past `acked` was made (None: none is remembered past it;
        acked below the floor: the caller says how long the slave was linked)."""
        i = bisect.bisect_right(self.ends, acked)
        return self.times[i] if i < len(self.times) else None

    def prune(self, floor: int | None, log_end: int) -> None:
        """Forget the marks every link acknowledged (`floor`: the least acked; None: no
        link, so none is kept)."""
        if floor is None:
            self.reset(log_end)
            return
        i = bisect.bisect_right(self.ends, floor)
        if i > 1024:
            self._cut(i)

    def _cut(self, i: int) -> None:
        self.floor = self.ends[i - 1]
        del self.ends[:i], self.times[:i]
