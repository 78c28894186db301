"""The rows a heatmap pass reduces (frames.window_entries' shape), for the merge and
window-reduce tests."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

INPUT = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")), ("broker", pa.string()), ("op", pa.string()),
    ("reason", pa.string()), ("count", pa.int64()), ("sum_us", pa.int64()),
    ("min_us", pa.int64()), ("max_us", pa.int64()), ("buckets", pa.map_(pa.int32(), pa.int64())),
])  # fmt: skip
T0 = datetime(2026, 11, 11, tzinfo=UTC)
