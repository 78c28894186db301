"""The client's own lateness: time the producer could not run, which no broker caused.

The Double-11 talk's fuse isolates a broker whose *response time* is too long. A client
measures that time with its own clock and its own thread, so when the client
is late (its event loop busy with other callbacks, its thread waiting for the
GIL or a core on a shared host), every call in flight ages and every answer
waiting in the socket looks slow, whatever the broker did.

The client proves it was running by a heartbeat: the thread or event loop that
reads the brokers' answers calls `beat(now, interval_s)` on a timer. A beat
later than the interval plus a small tolerance marks a *gap*: from when the
previous beat until the late one, the client may have been away (when it
stopped within that span is unknown, so all of it counts: charitable to the
brokers). The fuse then judges only the time the client was watching:

- a returned call's RT minus the gaps it overlapped (`away`); an asyncio
  loop runs ready I/O callbacks before due timers, so an answer read right
  after a stall is judged before the late beat lands: `away` counts that
  still-open gap too;
- a call in flight is overdue only when it has been waiting `line` seconds
  of watched time (`cutoff`), and never past the last moment the client was
  seen running (`watched_until`).

A client that never beats is judged as before (no gaps); one that rests (`rest`:
nothing in flight) starts afresh at its next beat. One writer (the
heartbeat's thread) appends to the list of gaps and replaces it when it trims it,
so a reader on another thread indexes a list that only grows under it.

The fuse asks for the cutoff of four lines on every housekeeping tick (each
millisecond) and a line can reach back over hundreds of gaps on a busy host:
each gap carries the running total of time away, so a cutoff is a binary search
(walking the gaps was a seventh of the demo producer's CPU).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

# A beat this much later than due is still on time: timer resolution and the
# few callbacks a healthy loop runs before it.
TOLERANCE_S = 0.001
KEEP_GAPS = 512  # a send times out after 3 s; 512 gaps cover that at 170 gaps/s
RECENT_S = 10.0  # the window of `worst_recent_s`


@dataclass(frozen=True, slots=True)
class LatenessFigures:
    """The heartbeat's record, for the snapshot and /metrics."""

    interval_s: float | None
    beats: int
    late_beats: int
    away_total_s: float  # time the client was away, summed since start
    worst_s: float  # longest gap ever
    worst_recent_s: float  # longest gap in the last RECENT_S seconds
    late_now_s: float  # how late the next beat is right now (0: on time)

    def to_dict(self) -> dict:
        return {"interval_s": self.interval_s, "beats": self.beats,
                "late_beats": self.late_beats, "away_total_s": self.away_total_s,
                "worst_s": self.worst_s, "worst_recent_s": self.worst_recent_s,
                "late_now_s": self.late_now_s}


class ClientLateness:
    def __init__(self, tolerance_s: float = TOLERANCE_S) -> None:
        self.tolerance_s = tolerance_s
        self.interval_s: float | None = None
        self.last: float | None = None  # time of the latest beat
        self.due_by = math.inf  # a beat later than this is late: the hot path's check
        # (start, end, away through this gap's end, end minus that): oldest first; the
        # last field grows with each gap, the key of `cutoff`'s search
        self._gaps: list[tuple[float, float, float, float]] = []
        self._away = 0.0  # the gaps' durations summed (the running total above)
        self.gap_end = -math.inf  # end of the newest recorded gap
        self.beats = 0
        self.late_beats = 0
        self.away_total_s = 0.0
        self.worst_s = 0.0

    @property
    def active(self) -> bool:
        return self.last is not None

    def beat(self, now: float, interval_s: float) -> float:
        """The client ran at `now`; it meant to beat every `interval_s`. Returns the lateness."""
        late = 0.0
        last = self.last
        if last is not None:
            due = last + (self.interval_s or interval_s)
            late = now - due
            if late > self.tolerance_s:
                # The client ran at `last` and again now; when in between it stopped is
                # unknown, so all of it is the client's (charitable to the brokers).
                self._record_gap(last, now)
                self.late_beats += 1
                self.away_total_s += late
                if late > self.worst_s:
                    self.worst_s = late
            else:
                late = 0.0
        self.interval_s = interval_s
        self.last = now
        self.due_by = now + interval_s + self.tolerance_s
        self.beats += 1
        return late

    def rest(self) -> None:
        """The client stops beating on purpose (nothing in flight): the time until its
        next beat is no gap, and no call is judged against it meanwhile."""
        self.last = None
        self.due_by = math.inf

    def _record_gap(self, start: float, end: float) -> None:
        self._away += end - start
        gaps = self._gaps
        if len(gaps) >= 2 * KEEP_GAPS:  # a new list: readers holding the old one are safe
            gaps = self._gaps = gaps[-KEEP_GAPS:]
        gaps.append((start, end, self._away, end - self._away))
        self.gap_end = end

    def _open_gap_start(self, now: float) -> float | None:
        """Start of the gap the client is in right now (its beat is overdue), if any:
        the last time it was seen running."""
        last, interval = self.last, self.interval_s
        if last is None or interval is None:
            return None
        return last if now - last - interval > self.tolerance_s else None

    def watched_until(self, now: float) -> float:
        """The latest instant the client is known to have been running."""
        open_start = self._open_gap_start(now)
        return now if open_start is None else open_start

    def away(self, start: float, now: float) -> float:
        """Seconds of [start, now] the client was away (recorded gaps and the open one)."""
        total = 0.0
        open_start = self._open_gap_start(now)
        if open_start is not None:
            total = now - max(open_start, start)
        if self.gap_end > start:  # only calls that overlapped a gap scan, newest first
            gaps = self._gaps
            for i in range(len(gaps) - 1, -1, -1):
                gap_start, gap_end = gaps[i][0], gaps[i][1]
                if gap_end <= start:
                    break
                total += max(0.0, min(gap_end, now) - max(gap_start, start))
        return max(0.0, min(total, now - start))

    def cutoff(self, now: float, line: float) -> float:
        """Calls started before the returned instant have been waiting more than
        `line` seconds of time the client watched, as of `now`.

        Time away between an instant x and t is the gaps' running total at t less
        the total at x, so the latest x with `line` seconds watched since is found
        by bisecting the gaps on (end - running total), which never decreases.
        """
        t, need = self.watched_until(now), line
        if self.gap_end <= t - need:
            return t - need  # no gap in the window: the common case
        gaps = self._gaps
        n = bisect_right(gaps, t, key=_end)  # gaps ending after t: only when
        if n < len(gaps):  # `now` was read before another thread's beat
            t = min(t, gaps[n][0])
        if n == 0:
            return t - need
        total = gaps[n - 1][2]
        i = bisect_right(gaps, t - need - total, hi=n, key=_key) - 1
        if i >= 0:  # gap i ends before x, every later one between x and t
            return t - need - (total - gaps[i][2])
        first_start, first_end, first_total, _ = gaps[0]  # x before every gap kept
        return t - need - (total - first_total + first_end - first_start)

    def figures(self, now: float) -> LatenessFigures:
        horizon = now - RECENT_S
        gaps, span = self._gaps, None
        for i in range(len(gaps) - 1, -1, -1):
            start, end = gaps[i][0], gaps[i][1]
            if end < horizon:
                break
            span = max(span or 0.0, end - start)
        recent = 0.0 if span is None else span - (self.interval_s or 0.0)
        open_start = self._open_gap_start(now)
        late_now = now - open_start - self.interval_s if open_start is not None else 0.0
        return LatenessFigures(self.interval_s, self.beats, self.late_beats, self.away_total_s,
                               max(self.worst_s, late_now), max(recent, late_now), late_now)


def _end(gap: tuple[float, float, float, float]) -> float:
    return gap[1]


def _key(gap: tuple[float, float, float, float]) -> float:
    return gap[3]
