"""Per-second send histograms in the console: each broker's last 5 minutes kept
by second, and exact merges of them for the cluster's percentiles.

Histories are tuples of (epoch second, LatencyHistogram) as BrokerStats
decodes them. The histograms are shared between successive states, never
mutated: a merge always adds into a fresh copy.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import pairwise

from broker_core.observe.stats_doc import HistorySecond
from heatmap import LatencyHistogram
from heatmap.sla import HISTORY_S  # the window every screen shows


def merge_history(old: Sequence[HistorySecond], new: Iterable[HistorySecond],
                  keep_s: int = HISTORY_S) -> tuple[HistorySecond, ...]:
    """Per-second histograms by second, the newest answer wins, the last `keep_s`
    seconds kept, oldest first. `old` is an earlier result (sorted and cut)."""
    new = tuple(new)
    if not new:
        return tuple(old)
    # A poll resends the last few seconds: usually `new` is in order and replaces
    # exactly the tail of `old` from its first second on. Then slices do it; else
    # by second. The pairs are reused, never rebuilt (200 brokers x 300 s of new
    # tuples a refresh would cost more in garbage collection than the merge).
    ts = [t for t, _ in new]
    at = bisect_left(old, ts[0], key=_second)
    tail = old[at:]
    if all(a < b for a, b in pairwise(ts)) and {t for t, _ in tail} <= set(ts):
        merged = (*old[:at], *new)
    else:
        by_ts = {pair[0]: pair for pair in old}
        by_ts.update((pair[0], pair) for pair in new)
        merged = tuple(by_ts[t] for t in sorted(by_ts))
    return merged[bisect_right(merged, merged[-1][0] - keep_s, key=_second):]


def _second(pair: HistorySecond) -> int:
    return pair[0]


def merge_histograms(hists: Iterable[LatencyHistogram]) -> LatencyHistogram:
    """One histogram from many, exactly (the hot loop of a refresh: 200 brokers x
    10 s). Empty ones are skipped; the first non-empty one sets the schema and
    any of another schema is left out rather than failing the whole merge."""
    out: LatencyHistogram | None = None
    for h in hists:
        if not h.count:
            continue
        if out is None:
            out = h.copy()
        elif h.schema == out.schema:
            out.merge(h)
    return out if out is not None else LatencyHistogram()
