"""Heatmap matrices: time columns x latency rows, the picture the Double-11 talk reads.

Rows are histogram buckets at a chosen (usually coarser) schema. The row range
is bounded by the data or by given limits; with limits, everything below or
above lands in an underflow or overflow row, so no outlier is clipped away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from heatmap.errors import HeatmapError
from heatmap.histogram import LatencyHistogram
from heatmap.layout import SCHEMA, bucket_index, bucket_lower, bucket_upper, downscale_index


@dataclass
class HeatmapMatrix:
    """Counts with rows ascending in latency (row 0 = fastest).

    Row ``r`` is the underflow row when ``underflow`` and ``r == 0``, the
    overflow row when ``overflow`` and ``r`` is the last; the others are
    buckets ``lo_index .. hi_index`` at ``schema``.
    """

    times: list[Any]
    counts: np.ndarray  # shape (rows, columns), int64
    schema: int
    lo_index: int
    hi_index: int
    underflow: bool = False
    overflow: bool = False

    @property
    def n_rows(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.counts.shape[1])

    def row_bounds(self, row: int) -> tuple[float, float]:
        """(lower, upper] in seconds; the overflow row's upper is infinity."""
        if self.underflow and row == 0:
            return 0.0, bucket_upper(self.lo_index - 1, self.schema)
        if self.overflow and row == self.n_rows - 1:
            return bucket_upper(self.hi_index, self.schema), float("inf")
        idx = self.lo_index + row - (1 if self.underflow else 0)
        return bucket_lower(idx, self.schema), bucket_upper(idx, self.schema)

    def row_label(self, row: int) -> str:
        lower, upper = self.row_bounds(row)
        if self.overflow and row == self.n_rows - 1:
            return ">" + format_seconds(lower)
        if self.underflow and row == 0:
            return "≤" + format_seconds(upper)
        return format_seconds(upper)

    def compress_columns(self, max_cols: int) -> HeatmapMatrix:
        """Sum neighbouring columns so at most ``max_cols`` remain (exact counts)."""
        if max_cols <= 0 or self.n_cols <= max_cols:
            return self
        k = -(-self.n_cols // max_cols)
        pad = (-self.n_cols) % k
        counts = np.pad(self.counts, ((0, 0), (0, pad)))
        counts = counts.reshape(self.n_rows, -1, k).sum(axis=2)
        return HeatmapMatrix(
            times=self.times[::k],
            counts=counts,
            schema=self.schema,
            lo_index=self.lo_index,
            hi_index=self.hi_index,
            underflow=self.underflow,
            overflow=self.overflow,
        )


def format_seconds(seconds: float) -> str:
    """Short human label: 950ns, 12µs, 3.1ms, 1.5s."""
    if seconds == float("inf"):
        return "inf"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.0f}{unit}" if value >= 10 else f"{value:.1f}{unit}"
    return f"{seconds * 1e9:.0f}ns"


def _downscale_keys(bucket_map: Mapping[int, int], shift: int) -> dict[int, int]:
    if not shift:
        return dict(bucket_map)
    out: dict[int, int] = {}
    for i, c in bucket_map.items():
        j = downscale_index(int(i), shift)
        out[j] = out.get(j, 0) + int(c)
    return out


def heatmap_from_buckets(
    times: Sequence[Any],
    bucket_maps: Sequence[Mapping[int, int]],
    schema: int = 2,
    source_schema: int = SCHEMA,
    lo_s: float | None = None,
    hi_s: float | None = None,
) -> HeatmapMatrix:
    """Build a matrix from one sparse bucket map (index -> count) per column."""
    if len(times) != len(bucket_maps):
        raise HeatmapError(f"{len(times)} times but {len(bucket_maps)} bucket maps")
    if schema > source_schema:
        raise HeatmapError(f"cannot draw schema {schema} from coarser schema {source_schema}")
    shift = source_schema - schema
    columns = [_downscale_keys(m, shift) for m in bucket_maps]
    present = [i for col in columns for i, c in col.items() if c]
    if lo_s is not None and hi_s is not None and lo_s >= hi_s:
        raise HeatmapError(f"lower limit {lo_s} s must be below upper limit {hi_s} s")
    lo = bucket_index(lo_s, schema) if lo_s is not None else (min(present) if present else 0)
    hi = bucket_index(hi_s, schema) if hi_s is not None else (max(present) if present else 0)
    hi = max(hi, lo)
    underflow, overflow = lo_s is not None, hi_s is not None
    n_rows = hi - lo + 1 + underflow + overflow
    counts = np.zeros((n_rows, len(columns)), dtype=np.int64)
    for col, buckets in enumerate(columns):
        for idx, c in buckets.items():
            if idx < lo:
                row = 0  # only reachable with a lower limit: the underflow row
            elif idx > hi:
                row = n_rows - 1
            else:
                row = idx - lo + underflow
            counts[row, col] += c
    return HeatmapMatrix(list(times), counts, schema, lo, hi, underflow, overflow)


def build_heatmap(
    series: Iterable[tuple[Any, LatencyHistogram]],
    schema: int = 2,
    lo_s: float | None = None,
    hi_s: float | None = None,
) -> HeatmapMatrix:
    """Build a matrix from a sequence of (time, histogram), one column each."""
    pairs = list(series)
    source = min((h.schema for _, h in pairs), default=SCHEMA)
    schema = min(schema, source)
    times = [t for t, _ in pairs]
    maps = [(h if h.schema == source else h.downscale(source)).buckets for _, h in pairs]
    return heatmap_from_buckets(times, maps, schema, source, lo_s, hi_s)
