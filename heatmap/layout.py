"""The bucket layout of every latency histogram in floodgate (docs/architecture.md,
"Latency histogram layout"): the one place that knows where buckets end.

Buckets are those of a Prometheus native histogram over seconds: at schema
``s`` bucket ``i`` holds ``(2**((i-1)/2**s), 2**(i/2**s)]``. Recording happens
at schema 3 (8 buckets per power of two, <= 4.4 % relative error); coarser
views are exact merges of neighbours, ``idx' = ceil(idx / 2**(3-s))``.

Values at or below the zero threshold ``2**-20`` s go to the zero bucket. It is
stored under the index of the threshold itself (``ZERO_INDEX = -160`` at
schema 3), whose upper bound *is* the threshold; so the sparse map stays one
flat ``int -> count`` mapping in memory, JSON, Parquet (``map<int,bigint>``)
and Prometheus, and downscaling keeps the zero bucket exact at every schema.
``MAX_INDEX`` (2**16 s, 18 h) is the largest index a stored row may use.

Index computation follows Prometheus' own Go client: ``frexp`` splits a value
into a fraction in [0.5, 1) and an exponent, and the fraction is located among
the eight precomputed sub-bucket bounds. Bucket bounds are therefore exact
floats and ``bucket_index(bucket_upper(i)) == i`` for every ``i``. Code that
needs bounds in bulk takes them from :func:`bucket_table`, :func:`bucket_uppers`
or (Spark) :func:`octave_uppers`, the very same floats, instead of computing
``2**(i/8)``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

import numpy as np

from heatmap.errors import HeatmapError

SCHEMA = 3
ZERO_THRESHOLD = 2.0**-20
ZERO_INDEX = -20 * 2**SCHEMA  # index whose upper bound is ZERO_THRESHOLD
MAX_INDEX = 16 * 2**SCHEMA  # upper bound 2**16 s: beyond it a writer is corrupt, not slow
PER_OCTAVE = 2**SCHEMA  # buckets per power of two

# Fractions in [0.5, 1) at which schema-3 buckets end: 0.5 * 2**(j/8).
_BOUNDS = tuple(math.ldexp(2.0 ** (j / 8), -1) for j in range(8))
_BOUNDS_NP = np.array(_BOUNDS)
_frexp = math.frexp
_inf = math.inf


def check_schema(schema: int) -> int:
    """``schema`` if it is a valid integer schema in [-4, 3], else HeatmapError."""
    if not isinstance(schema, int) or isinstance(schema, bool) or not -4 <= schema <= SCHEMA:
        raise HeatmapError(f"schema must be an integer in [-4, {SCHEMA}], got {schema!r}")
    return schema


def bad_value(seconds: Any) -> HeatmapError:
    return HeatmapError(f"latency must be a finite number of seconds >= 0, got {seconds!r}")


def bucket_index(seconds: float, schema: int = SCHEMA) -> int:
    """Index of the bucket holding ``seconds`` at ``schema`` (default 3)."""
    if not seconds >= 0.0 or seconds == _inf:
        raise bad_value(seconds)
    if seconds <= ZERO_THRESHOLD:
        idx = ZERO_INDEX
    else:
        frac, exp = _frexp(seconds)
        idx = bisect_left(_BOUNDS, frac) + (exp - 1) * 8
    if schema == SCHEMA:
        return idx
    return downscale_index(idx, SCHEMA - check_schema(schema))


def bucket_upper(index: int, schema: int = SCHEMA) -> float:
    """Upper bound (inclusive) in seconds of bucket ``index`` at ``schema``."""
    # Through the schema-3 index, so bounds are the very same floats at every schema.
    q, j = divmod(index << (SCHEMA - check_schema(schema)), 8)
    return math.ldexp(_BOUNDS[j], q + 1)


def bucket_lower(index: int, schema: int = SCHEMA) -> float:
    """Lower bound (exclusive) in seconds; 0.0 for the zero bucket."""
    if index <= zero_index(schema):
        return 0.0
    return bucket_upper(index - 1, schema)


def zero_index(schema: int = SCHEMA) -> int:
    """Index of the zero bucket at ``schema``."""
    return ZERO_INDEX if schema == SCHEMA else downscale_index(ZERO_INDEX, SCHEMA - schema)


def downscale_index(idx, shift: int):
    """ceil(idx / 2**shift), for negative indices too; ints or integer arrays."""
    return -((-idx) >> shift)


def bucket_uppers(indices: np.ndarray) -> np.ndarray:
    """Vectorized :func:`bucket_upper` at schema 3: the same floats, bit for bit."""
    q, j = np.divmod(np.asarray(indices, dtype=np.int64), 8)
    return np.ldexp(_BOUNDS_NP[j], (q + 1).astype(np.int32))


def bucket_table(lo: int = ZERO_INDEX, hi: int = MAX_INDEX) -> tuple[np.ndarray, ...]:
    """(index, lower, upper) arrays of schema-3 buckets ``lo..hi``, for bulk use.

    ``lower`` is 0.0 for the zero bucket, as :func:`bucket_lower` says. Spark
    turns ``upper`` into an array literal indexed by ``bucket - lo``.
    """
    if lo > hi:
        raise HeatmapError(f"bucket range {lo}..{hi} is empty")
    index = np.arange(lo, hi + 1, dtype=np.int64)
    upper = bucket_uppers(index)
    lower = np.where(index <= ZERO_INDEX, 0.0, bucket_uppers(index - 1))
    return index, lower, upper


def octave_uppers() -> np.ndarray:
    """Upper bounds of buckets 0 .. PER_OCTAVE-1: (1, 2**(1/8), ..., 2**(7/8)) s.

    Bucket ``i``'s upper bound is ``octave_uppers()[i mod 8] * 2**(i // 8)``,
    exactly (a power-of-two scaling): for engines such as Spark SQL that
    compute a bound from an index with a short array rather than the table.
    """
    return bucket_uppers(np.arange(PER_OCTAVE))


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


def warm() -> None:
    """Build the lookup tables now (~20 ms of numpy): a broker calls this before it
    serves; built on first use instead, its first latency fold under load held the
    loop that long, on a master and on its slave at once (a sync send waits for both)."""
    _key_tables()


def bucket_indices(values: np.ndarray) -> np.ndarray:
    """Vectorized :func:`bucket_index` at schema 3 (values already validated).

    Two table look-ups on the float's bits instead of ``frexp`` and a binary
    search: several times faster; the tests check both agree bit for bit.
    """
    low, bound = _key_tables()
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    key = (bits >> np.uint64(_KEY_SHIFT)).astype(np.intp)
    return low[key] + (bits > bound[key])
