"""The one latency histogram of floodgate (docs/architecture.md, "Latency histogram layout").

Sparse counts over the bucket layout of :mod:`heatmap.layout` (schema 3,
8 buckets per power of two, a zero bucket at ``ZERO_INDEX``), plus exact
count, sum, min and max. Merge adds counts; coarser views are exact merges of
neighbours (:meth:`LatencyHistogram.downscale`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from heatmap.errors import HeatmapError
from heatmap.layout import (
    SCHEMA,
    ZERO_INDEX,
    ZERO_THRESHOLD,
    bad_value,
    bucket_index,
    bucket_indices,
    bucket_lower,
    bucket_upper,
    check_schema,
    downscale_index,
    zero_index,
)
from heatmap.quantile import quantile_rank

# Re-exported: the layout was defined here before heatmap.layout existed.
__all__ = [
    "SCHEMA",
    "ZERO_INDEX",
    "ZERO_THRESHOLD",
    "LatencyHistogram",
    "bucket_index",
    "bucket_indices",
    "bucket_lower",
    "bucket_upper",
    "zero_index",
]

_inf = math.inf


class LatencyHistogram:
    """Sparse schema-3 latency histogram with exact count, sum, min and max.

    ``record`` only validates and appends to a small buffer; every
    ``FOLD_AT`` values (and before any read) the buffer is folded in with the
    vectorized path. That keeps the per-call cost near a list append while the
    bucketing runs at numpy speed: the amortized cost is what bench/ measures.

    Not thread-safe, by design: a recorder shared between threads takes its
    own lock (or keeps one histogram per thread and merges, which is exact).
    """

    __slots__ = ("schema", "_buckets", "_count", "_sum", "_min", "_max", "_pending")
    FOLD_AT = 4096

    def __init__(self, schema: int = SCHEMA) -> None:
        self.schema = check_schema(schema)
        self._buckets: dict[int, int] = {}
        self._count = 0
        self._sum = 0.0
        self._min = _inf
        self._max = -_inf
        self._pending: list[float] = []

    # -- recording --------------------------------------------------------
    def record(self, seconds: float) -> None:
        """Record one latency in seconds; HeatmapError (nothing recorded) if bad."""
        if not 0.0 <= seconds < _inf:  # also false for NaN
            raise bad_value(seconds)
        pending = self._pending
        pending.append(seconds)
        if len(pending) >= self.FOLD_AT:
            self._fold()

    def record_many(self, seconds: Iterable[float] | np.ndarray) -> None:
        """Record an array of latencies at once; all-or-nothing on bad input."""
        values = np.asarray(seconds, dtype=np.float64).ravel()
        if values.size == 0:
            return
        lo, hi = values.min(), values.max()
        if not (lo >= 0.0 and hi < _inf):  # also catches NaN
            bad = values[~((values >= 0.0) & (values < _inf))][0]
            raise bad_value(float(bad))
        self._add(values, float(lo), float(hi))

    def _fold(self) -> None:
        if self._pending:
            values = np.array(self._pending, dtype=np.float64)
            self._pending.clear()
            self._add(values, float(values.min()), float(values.max()))

    def _add(self, values: np.ndarray, lo: float, hi: float) -> None:
        idx = bucket_indices(values)
        if self.schema != SCHEMA:
            idx = downscale_index(idx, SCHEMA - self.schema)
        base = int(idx.min())
        counts = np.bincount(idx - base)
        nz = np.flatnonzero(counts)
        b = self._buckets
        for i, c in zip((nz + base).tolist(), counts[nz].tolist(), strict=True):
            b[i] = b.get(i, 0) + c
        self._count += int(values.size)
        self._sum += float(values.sum())
        self._min = min(self._min, lo)
        self._max = max(self._max, hi)

    # -- reading ----------------------------------------------------------
    @property
    def count(self) -> int:
        self._fold()
        return self._count

    @property
    def sum(self) -> float:
        self._fold()
        return self._sum

    @property
    def min(self) -> float | None:
        self._fold()
        return self._min if self._count else None

    @property
    def max(self) -> float | None:
        self._fold()
        return self._max if self._count else None

    @property
    def mean(self) -> float | None:
        self._fold()
        return self._sum / self._count if self._count else None

    def extent(self) -> tuple[int, float, float, float]:
        """(count, sum, min, max) in one fold (min inf, max -inf when empty): what a
        window over closed seconds adds up, four properties' calls in one."""
        self._fold()
        return self._count, self._sum, self._min, self._max

    @property
    def buckets(self) -> dict[int, int]:
        """A copy of the sparse counts, index -> count, in index order."""
        self._fold()
        return dict(sorted(self._buckets.items()))

    def quantile(self, q: float) -> float | None:
        """The rule of heatmap.quantile: the upper bound of the bucket where the
        running count reaches ceil(q * count), clamped to [min, max]. None when empty.
        """
        if not 0.0 <= q <= 1.0:
            raise HeatmapError(f"quantile must be in [0, 1], got {q!r}")
        self._fold()
        if not self._count:
            return None
        rank = quantile_rank(q, self._count)
        seen = 0
        for idx in sorted(self._buckets):
            seen += self._buckets[idx]
            if seen >= rank:
                upper = bucket_upper(idx, self.schema)
                return min(max(upper, self._min), self._max)
        return self._max  # unreachable while counts are consistent

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        return [self.quantile(q) for q in qs]

    def summary(self, suffix: str = "") -> dict[str, Any]:
        """count, mean, p50, p99, p999, max in seconds (None when empty): the figures
        every report of a histogram gives. ``suffix`` (e.g. "_s") names the units in keys."""
        self._fold()
        out: dict[str, Any] = {"count": self._count}
        for key, value in (("mean", self.mean), ("p50", self.quantile(0.5)),
                           ("p99", self.quantile(0.99)), ("p999", self.quantile(0.999)),
                           ("max", self.max)):
            out[key + suffix] = value
        return out

    def count_above(self, seconds: float) -> int:
        """Values in buckets whose lower bound is >= ``seconds`` (a lower bound
        on the exact number above; exact when ``seconds`` is a bucket bound)."""
        self._fold()
        return sum(
            c for i, c in self._buckets.items() if bucket_lower(i, self.schema) >= seconds
        )

    # -- combining --------------------------------------------------------
    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """Add ``other``'s counts into this histogram; returns self."""
        if not isinstance(other, LatencyHistogram):
            raise TypeError(f"can only merge a LatencyHistogram, got {type(other).__name__}")
        if other.schema != self.schema:
            raise HeatmapError(
                f"cannot merge schema {other.schema} into schema {self.schema}; downscale first"
            )
        if self._pending:
            self._fold()
        if other._pending:
            other._fold()
        if not other._count:
            return self
        # the console merges ~2,000 of these a refresh: locals, no builtin calls
        b = self._buckets
        get = b.get
        for i, c in other._buckets.items():
            b[i] = get(i, 0) + c
        self._count += other._count
        self._sum += other._sum
        if other._min < self._min:
            self._min = other._min
        if other._max > self._max:
            self._max = other._max
        return self

    def __add__(self, other: LatencyHistogram) -> LatencyHistogram:
        return self.copy().merge(other)

    def copy(self) -> LatencyHistogram:
        self._fold()
        new = LatencyHistogram(self.schema)
        new._buckets = dict(self._buckets)
        new._count, new._sum, new._min, new._max = self._count, self._sum, self._min, self._max
        return new

    def downscale(self, schema: int) -> LatencyHistogram:
        """An exact coarser copy: neighbours merged, idx' = ceil(idx / 2**(s0-s))."""
        check_schema(schema)
        if schema > self.schema:
            raise HeatmapError(f"cannot upscale schema {self.schema} to {schema}")
        new = self.copy()
        new.schema = schema
        shift = self.schema - schema
        if shift:
            merged: dict[int, int] = {}
            for i, c in self._buckets.items():
                j = downscale_index(i, shift)
                merged[j] = merged.get(j, 0) + c
            new._buckets = merged
        return new

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        self._fold()
        other._fold()
        return (
            self.schema == other.schema
            and self._buckets == other._buckets
            and self._count == other._count
            and self._sum == other._sum
            and self.min == other.min
            and self.max == other.max
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"LatencyHistogram(count={self._count}, p50={self.quantile(0.5)}, "
            f"p99={self.quantile(0.99)}, max={self.max}, schema={self.schema})"
        )

    # -- serialisation ----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; bucket keys are strings (JSON object keys)."""
        self._fold()
        return {
            "schema": self.schema,
            "count": self._count,
            "sum": self._sum,
            "min": self.min,
            "max": self.max,
            "buckets": {str(i): c for i, c in sorted(self._buckets.items())},
        }

    def counts_view(self) -> Mapping[int, int]:
        """The sparse counts as held (index -> count), not copied: for a caller keeping
        running sums of many histograms (broker_core.observe.recorder). Read only."""
        self._fold()
        return self._buckets

    @classmethod
    def from_parts(cls, buckets: dict[int, int], count: int, total: float, lo: float,
                   hi: float, schema: int = SCHEMA) -> LatencyHistogram:
        """A histogram of parts already consistent (kept running sums): no checks, and
        `buckets` is taken, not copied."""
        new = cls(schema)
        new._buckets, new._count, new._sum, new._min, new._max = buckets, count, total, lo, hi
        return new

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyHistogram:
        """Inverse of :meth:`to_dict`; HeatmapError naming the field if inconsistent."""
        if not isinstance(data, Mapping):
            raise HeatmapError(f"histogram must be a mapping, got {type(data).__name__}")
        # C-speed passes over the buckets: the console decodes thousands of these a second
        try:
            hist = cls(int(data.get("schema", SCHEMA)))
            raw = data.get("buckets") or {}
            if not isinstance(raw, Mapping):
                raise HeatmapError("'buckets' must be a mapping of index -> count")
            buckets = {int(k): int(v) for k, v in raw.items()}
            if len(buckets) < len(raw):  # "3" and "03" are one bucket
                buckets = {}
                for k, v in raw.items():
                    buckets[int(k)] = buckets.get(int(k), 0) + int(v)
            counts = buckets.values()
            seen = sum(counts)
            negative = bool(buckets) and min(counts) < 0
            if 0 in counts:
                buckets = {i: c for i, c in buckets.items() if c}
            count = int(data["count"]) if "count" in data else seen
            total = float(data.get("sum", 0.0))
            lo, hi = data.get("min"), data.get("max")
            if count and lo is not None and hi is not None:
                lo, hi = float(lo), float(hi)
        except (TypeError, ValueError, OverflowError) as exc:
            raise HeatmapError(f"bad histogram: {exc}") from None
        if negative:
            raise HeatmapError("bad histogram: negative bucket count")
        if count != seen:
            raise HeatmapError(f"bad histogram: count {count} != sum of buckets {seen}")
        if count and (lo is None or hi is None):
            raise HeatmapError("bad histogram: min and max are required when count > 0")
        hist._buckets = buckets
        hist._count = count
        hist._sum = total
        if count:
            hist._min, hist._max = lo, hi
        return hist
