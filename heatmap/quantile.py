"""The percentile rule every floodgate figure follows, in one place.

A q-quantile is the upper bound of the first bucket (in index order) where the
running count reaches ceil(q * count), at least 1, clamped to the exact
[min, max]: never below the exact (inverted-CDF) quantile, at most one bucket
above it, and quantile(1) is the exact max. `LatencyHistogram.quantile` applies
it to one histogram; `grouped_quantile` to many at once (the reports' merged
aggregates, in numpy), so the two agree to the float.
"""

from __future__ import annotations

import math

import numpy as np

from heatmap.layout import bucket_uppers


def quantile_rank(q: float, count: int) -> int:
    """How many values the running count must reach."""
    return max(1, math.ceil(q * count))


def grouped_quantile(q: float, count: np.ndarray, first: np.ndarray, n: np.ndarray,
                     bucket: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The q-quantile of each group (seconds; NaN where a group has no values).

    Groups are runs of entries, each run sorted by bucket index: ``bucket`` and ``n``
    per entry, ``first`` the index of each group's first entry, ``count``, ``lo``
    and ``hi`` (seconds) per group.
    """
    cum = np.r_[0, np.cumsum(n)]  # cum[i]: values in the entries before entry i
    base = cum[first]
    rank = np.maximum(np.ceil(q * count.astype(np.float64)), 1).astype(np.int64)
    # the entry where the running count reaches the rank (cum[at + 1] >= base + rank)
    at = np.clip(np.searchsorted(cum, base + rank, side="left") - 1, 0, max(len(n) - 1, 0))
    upper = bucket_uppers(bucket[at]) if len(n) else np.zeros(len(count))
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, np.minimum(np.maximum(upper, lo), hi), np.nan)
