"""The one latency histogram of floodgate (DESIGN.md, "Latency histogram layout").

Buckets are those of a Prometheus native histogram over seconds: at schema
``s`` bucket ``i`` holds ``(2**((i-1)/2**s), 2**(i/2**s)]``. Recording happens
at schema 3 (8 buckets per power of two, <= 4.4 % relative error); coarser
views are exact merges of neighbours (:meth:`LatencyHistogram.downscale`).

Values at or below the zero threshold ``2**-20`` s go to the zero bucket. It is
stored under the index of the threshold itself (``ZERO_INDEX = -160`` at
schema 3), whose upper bound *is* the threshold; so the sparse map stays one
flat ``int -> count`` mapping in memory, JSON, Parquet (``map<int,bigint>``)
and Prometheus, and downscaling keeps the zero bucket exact at every schema.

Index computation follows Prometheus' own Go client: ``frexp`` splits a value
into a fraction in [0.5, 1) and an exponent, and the fraction is located among
the eight precomputed sub-bucket bounds. Bucket bounds are therefore exact
floats and ``bucket_index(bucket_upper(i)) == i`` for every ``i``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

SCHEMA = 3
ZERO_THRESHOLD = 2.0**-20
ZERO_INDEX = -20 * 2**SCHEMA  # index whose upper bound is ZERO_THRESHOLD

# Fractions in [0.5, 1) at which schema-3 buckets end: 0.5 * 2**(j/8).
_BOUNDS = tuple(math.ldexp(2.0 ** (j / 8), -1) for j in range(8))
_BOUNDS_NP = np.array(_BOUNDS)
_frexp = math.frexp
_inf = math.inf


def _check_schema(schema: int) -> int:
    if not isinstance(schema, int) or isinstance(schema, bool) or not -4 <= schema <= SCHEMA:
        raise ValueError(f"schema must be an integer in [-4, {SCHEMA}], got {schema!r}")
    return schema


def _bad_value(seconds: Any) -> ValueError:
    return ValueError(f"latency must be a finite number of seconds >= 0, got {seconds!r}")


def bucket_index(seconds: float, schema: int = SCHEMA) -> int:
    """Index of the bucket holding ``seconds`` at ``schema`` (default 3)."""
    if not seconds >= 0.0 or seconds == _inf:
        raise _bad_value(seconds)
    if seconds <= ZERO_THRESHOLD:
        idx = ZERO_INDEX
    else:
        frac, exp = _frexp(seconds)
        idx = bisect_left(_BOUNDS, frac) + (exp - 1) * 8
    if schema == SCHEMA:
        return idx
    return _downscale_index(idx, SCHEMA - _check_schema(schema))


def bucket_upper(index: int, schema: int = SCHEMA) -> float:
    """Upper bound (inclusive) in seconds of bucket ``index`` at ``schema``."""
    # Through the schema-3 index, so bounds are the very same floats at every schema.
    q, j = divmod(index << (SCHEMA - _check_schema(schema)), 8)
    return math.ldexp(_BOUNDS[j], q + 1)


def bucket_lower(index: int, schema: int = SCHEMA) -> float:
    """Lower bound (exclusive) in seconds; 0.0 for the zero bucket."""
    if index <= zero_index(schema):
        return 0.0
    return bucket_upper(index - 1, schema)


def zero_index(schema: int = SCHEMA) -> int:
    """Index of the zero bucket at ``schema``."""
    return ZERO_INDEX if schema == SCHEMA else _downscale_index(ZERO_INDEX, SCHEMA - schema)


def _downscale_index(idx: int, shift: int) -> int:
    # ceil(idx / 2**shift) for negative indices too.
    return -((-idx) >> shift)


_KEY_SHIFT = 44  # a float64's bits >> 44: 11 exponent bits and the top 8 mantissa bits
_tables: tuple[np.ndarray, np.ndarray] | None = None


def _key_tables() -> tuple[np.ndarray, np.ndarray]:
    """Lookup tables over ``bits >> 44`` of non-negative float64 values.

    A key names a cell of 2**44 consecutive floats. Cells are far narrower
    than the gap between two bucket bounds, so each holds at most one bound:
    ``index = low[key] + (bits > bound[key])``, exact because the bit patterns
    of non-negative floats sort like their values. Built on first use (6 MiB);
    a process only touches the few exponents its latencies span.
    """
    global _tables
    if _tables is None:
        keys = np.arange(2**19, dtype=np.int64)  # sign bit 0
        exp, cell = keys >> 8, keys & 255
        mant = np.array([int((2.0 * b - 1.0) * 2**52) for b in _BOUNDS], dtype=np.int64)
        shift = _KEY_SHIFT  # mantissa bits below the cell
        low = (exp - 1023) * 8 + np.searchsorted(mant, cell << shift, side="left")
        bound = np.full(keys.size, np.iinfo(np.uint64).max, dtype=np.uint64)
        for m in mant.tolist():  # the bound sits in the cell of its top mantissa bits
            in_cell = keys[cell == (m >> shift)]
            bound[in_cell] = ((in_cell >> 8) << 52 | m).astype(np.uint64)
        zero_bits = int(np.array(ZERO_THRESHOLD).view(np.uint64))
        zero_key = zero_bits >> _KEY_SHIFT
        low[: zero_key + 1] = ZERO_INDEX
        bound[:zero_key] = np.iinfo(np.uint64).max
        bound[zero_key] = zero_bits  # the threshold itself belongs to the zero bucket
        low[zero_key] = ZERO_INDEX
        _tables = (low.astype(np.int32), bound)
    return _tables


def bucket_indices(values: np.ndarray) -> np.ndarray:
    """Vectorized :func:`bucket_index` at schema 3 (values already validated).

    Two table look-ups on the float's bits instead of ``frexp`` and a binary
    search: several times faster; the tests check both agree bit for bit.
    """
    low, bound = _key_tables()
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    key = (bits >> np.uint64(_KEY_SHIFT)).astype(np.intp)
    return low[key] + (bits > bound[key])


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
        self.schema = _check_schema(schema)
        self._buckets: dict[int, int] = {}
        self._count = 0
        self._sum = 0.0
        self._min = _inf
        self._max = -_inf
        self._pending: list[float] = []

    # -- recording --------------------------------------------------------
    def record(self, seconds: float) -> None:
        """Record one latency in seconds; ValueError (nothing recorded) if bad."""
        if not 0.0 <= seconds < _inf:  # also false for NaN
            raise _bad_value(seconds)
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
            raise _bad_value(float(bad))
        self._add(values, float(lo), float(hi))

    def _fold(self) -> None:
        if self._pending:
            values = np.array(self._pending, dtype=np.float64)
            self._pending.clear()
            self._add(values, float(values.min()), float(values.max()))

    def _add(self, values: np.ndarray, lo: float, hi: float) -> None:
        idx = bucket_indices(values)
        if self.schema != SCHEMA:
            idx = -((-idx) >> (SCHEMA - self.schema))
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

    @property
    def buckets(self) -> dict[int, int]:
        """A copy of the sparse counts, index -> count, in index order."""
        self._fold()
        return dict(sorted(self._buckets.items()))

    def quantile(self, q: float) -> float | None:
        """Upper bound of the bucket where the cumulative count reaches q*count.

        Clamped to [min, max], so ``quantile(1)`` is the exact max and the
        answer is never below the exact (inverted-CDF) quantile and at most one
        bucket above it. None when the histogram is empty.
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q!r}")
        self._fold()
        if not self._count:
            return None
        rank = max(1, math.ceil(q * self._count))
        seen = 0
        for idx in sorted(self._buckets):
            seen += self._buckets[idx]
            if seen >= rank:
                upper = bucket_upper(idx, self.schema)
                return min(max(upper, self._min), self._max)
        return self._max  # unreachable while counts are consistent

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        return [self.quantile(q) for q in qs]

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
            raise ValueError(
                f"cannot merge schema {other.schema} into schema {self.schema}; downscale first"
            )
        self._fold()
        other._fold()
        b = self._buckets
        for i, c in other._buckets.items():
            b[i] = b.get(i, 0) + c
        self._count += other._count
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
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
        _check_schema(schema)
        if schema > self.schema:
            raise ValueError(f"cannot upscale schema {self.schema} to {schema}")
        new = self.copy()
        new.schema = schema
        shift = self.schema - schema
        if shift:
            merged: dict[int, int] = {}
            for i, c in self._buckets.items():
                j = _downscale_index(i, shift)
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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyHistogram:
        """Inverse of :meth:`to_dict`; ValueError naming the field if inconsistent."""
        if not isinstance(data, Mapping):
            raise ValueError(f"histogram must be a mapping, got {type(data).__name__}")
        try:
            hist = cls(int(data.get("schema", SCHEMA)))
            raw = data.get("buckets") or {}
            if not isinstance(raw, Mapping):
                raise ValueError("'buckets' must be a mapping of index -> count")
            buckets = {int(k): int(v) for k, v in raw.items()}
            count = int(data.get("count", sum(buckets.values())))
            total = float(data.get("sum", 0.0))
            lo, hi = data.get("min"), data.get("max")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad histogram: {exc}") from None
        if any(c < 0 for c in buckets.values()):
            raise ValueError("bad histogram: negative bucket count")
        if count != sum(buckets.values()):
            raise ValueError(
                f"bad histogram: count {count} != sum of buckets {sum(buckets.values())}"
            )
        if count and (lo is None or hi is None):
            raise ValueError("bad histogram: min and max are required when count > 0")
        hist._buckets = {i: c for i, c in buckets.items() if c}
        hist._count = count
        hist._sum = total
        if count:
            hist._min, hist._max = float(lo), float(hi)
        return hist
