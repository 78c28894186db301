"""Per-operation latency, second by second: what /stats, /metrics and the
metrics log are built from.

`OpRecorder` keeps, per operation, the histogram of the current second, a
ring of the last few minutes of closed seconds, and a cumulative histogram
for Prometheus. Everything runs on the broker's event-loop thread, so nothing
here locks (LatencyHistogram is not thread-safe by design).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker_core.observe.figures import OpWindow
from heatmap import LatencyHistogram
from heatmap.op_latency import OpLatency
from heatmap.sla import HISTORY_S

_inf = float("inf")
HISTORY_SECONDS = HISTORY_S  # heatmap.sla: the same window everywhere
WINDOWS_S = (1, 10, 60)


@dataclass
class OpSecond(OpLatency):
    """One operation's figures for one second (its latencies: heatmap's OpLatency)."""

    msgs: int = 0
    bytes: int = 0
    errors: int = 0  # answered with an error, stored nothing
    failures: int = 0  # of those, failed by the broker itself (protocol.BROKER_FAILURE_CODES)


@dataclass
class ClosedSecond:
    """A second that has ended: its figures no longer change."""

    ts: int  # epoch second (UTC) the figures belong to
    ops: dict[str, OpSecond]


class OpRecorder:
    """Records op latencies; `roll()` once a second closes the current second."""

    def __init__(
        self, ops: Iterable[str], clock: Callable[[], float], history_s: int = HISTORY_SECONDS
    ) -> None:
        self.ops = tuple(ops)
        self._clock = clock
        self._second = int(clock())
        self._current = {op: OpSecond() for op in self.ops}
        self.history: deque[ClosedSecond] = deque(maxlen=history_s)
        # Bucket counts of each op over the last w closed seconds (WINDOWS_S), kept by
        # adding the second that closes and taking out the one that leaves: a snapshot
        # merged 71 histograms an op each tick (~2 ms of the loop, the tick's largest part).
        self._running = {op: {w: {} for w in WINDOWS_S if w < history_s} for op in self.ops}
        self.total = {op: LatencyHistogram() for op in self.ops}
        self.msgs_total = dict.fromkeys(self.ops, 0)
        self.bytes_total = dict.fromkeys(self.ops, 0)
        self.errors_total = dict.fromkeys(self.ops, 0)
        self.failures_total = dict.fromkeys(self.ops, 0)
        self.over_sla_total = dict.fromkeys(self.ops, 0)

    def record(
        self, op: str, seconds: float, msgs: int = 1, nbytes: int = 0, ok: bool = True,
        failure: bool = False, sends: int = 1,
    ) -> None:
        """`ok`: stored or delivered; `failure` (with ok False): the broker's own failure.
        `sends`: how many sends the request carried (a SEND_MULTI's): each one an error
        when the request is."""
        cur = self._current[op]
        cur.record(seconds)  # the histogram and the exact count over the SLA max
        if ok:  # messages in/out are the ones stored or delivered, not those refused
            cur.msgs += msgs
            cur.bytes += nbytes
        else:
            cur.errors += sends
            cur.failures += failure * sends

    def add(self, op: str, span: OpLatency) -> None:
        """Fold latencies timed elsewhere (the store's flush thread) into this second."""
        self._current[op].merge(span)

    def roll(self, final: bool = False) -> list[ClosedSecond]:
        """Close every second that has ended (`final`: this one too, as it stands: the
        broker is stopping); returns them, oldest first."""
        now = int(self._clock()) + final
        closed = []
        while self._second < now:
            second = ClosedSecond(self._second, self._current)
            for op, fig in second.ops.items():
                self.total[op].merge(fig.hist)
                self.msgs_total[op] += fig.msgs
                self.bytes_total[op] += fig.bytes
                self.errors_total[op] += fig.errors
                self.failures_total[op] += fig.failures
                self.over_sla_total[op] += fig.over_sla
            self.history.append(second)
            self._slide(second)
            closed.append(second)
            self._current = {op: OpSecond() for op in self.ops}
            self._second += 1
            if now - self._second > self.history.maxlen:  # long pause: skip empty seconds
                self._second = now - self.history.maxlen
        return closed

    def _slide(self, second: ClosedSecond) -> None:
        n = len(self.history)
        for op, fig in second.ops.items():
            for w, counts in self._running[op].items():
                _add_counts(counts, fig.hist.counts_view(), 1)
                if n > w:
                    _add_counts(counts, self.history[n - w - 1].ops[op].hist.counts_view(), -1)

    def merged_window(self, op: str, seconds: int) -> OpSecond:
        """The last ``seconds`` closed seconds merged one by one: windows not kept running."""
        out = OpSecond()
        for second in list(self.history)[-seconds:]:
            fig = second.ops[op]
            out.merge(fig)
            out.msgs += fig.msgs
            out.bytes += fig.bytes
            out.errors += fig.errors
            out.failures += fig.failures
        return out

    def window(self, op: str, seconds: int) -> OpSecond:
        """Merged figures of the last ``seconds`` closed seconds."""
        running = self._running[op].get(seconds)
        if running is None:
            return self.merged_window(op, seconds)
        out = OpSecond()
        if not running:  # nothing timed in the window: no message or error either (a
            return out  # slave's sends and pulls: two of its three ops, every tick)
        n = len(self.history)
        recent = [self.history[i] for i in range(max(0, n - seconds), n)]
        # the counts are kept; the rest is a pass over scalars, in the order a merge adds
        count, total, lo, hi = 0, 0.0, _inf, -_inf
        for second in recent:
            fig = second.ops[op]
            c, t, mn, mx = fig.hist.extent()
            if c:
                count += c
                total += t
                if mn < lo:
                    lo = mn
                if mx > hi:
                    hi = mx
            out.over_sla += fig.over_sla
            out.msgs += fig.msgs
            out.bytes += fig.bytes
            out.errors += fig.errors
            out.failures += fig.failures
        out.hist = LatencyHistogram.from_parts(dict(running), count, total, lo, hi)
        return out


def _add_counts(into: dict[int, int], counts, sign: int) -> None:
    get = into.get
    for i, c in counts.items():
        if v := get(i, 0) + sign * c:
            into[i] = v
        else:
            del into[i]


def summarize(fig: OpSecond, seconds: int) -> OpWindow:
    """A window's figures: rates, percentiles (seconds), errors."""
    h = fig.hist
    return OpWindow(rate=h.count / seconds, msgs_per_s=fig.msgs / seconds,
                    bytes_per_s=fig.bytes / seconds, errors=fig.errors, failures=fig.failures,
                    over_20ms=fig.over_sla,
                    **h.summary())
