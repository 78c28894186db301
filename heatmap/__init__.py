"""The one latency-histogram type of floodgate, heatmap matrices and renderers.

`LatencyHistogram` is what brokers record into, Prometheus exports, Spark
merges and the console draws. The whole latency contract lives here:
`heatmap.layout` (bucket bounds, docs/architecture.md), `heatmap.sla` (the Double-11 talk's 3 ms /
20 ms), `heatmap.metrics_log` (Parquet schemas, rows, quarantine rules; needs
pyarrow, so import it by name). Renderers import their heavy libraries lazily:
`TerminalHeatmap` needs Rich, `render_png` matplotlib.
"""

from heatmap.errors import HeatmapError
from heatmap.histogram import LatencyHistogram
from heatmap.layout import (
    MAX_INDEX,
    SCHEMA,
    ZERO_INDEX,
    ZERO_THRESHOLD,
    bucket_index,
    bucket_indices,
    bucket_lower,
    bucket_table,
    bucket_upper,
    bucket_uppers,
    zero_index,
)
from heatmap.matrix import HeatmapMatrix, build_heatmap, format_seconds, heatmap_from_buckets
from heatmap.sla import SLA_MAX_S, SLA_MAX_US, SLA_MEAN_S, SLA_MEAN_US

__all__ = [
    "MAX_INDEX",
    "SCHEMA",
    "SLA_MAX_S",
    "SLA_MAX_US",
    "SLA_MEAN_S",
    "SLA_MEAN_US",
    "ZERO_INDEX",
    "ZERO_THRESHOLD",
    "HeatmapError",
    "HeatmapMatrix",
    "LatencyHistogram",
    "TerminalHeatmap",
    "bucket_index",
    "bucket_indices",
    "bucket_lower",
    "bucket_table",
    "bucket_upper",
    "bucket_uppers",
    "build_heatmap",
    "format_seconds",
    "heatmap_from_buckets",
    "render_png",
    "render_text",
    "zero_index",
]


def __getattr__(name: str):
    # Renderers pull in Rich / matplotlib; load them only when asked for.
    if name in ("TerminalHeatmap", "render_text"):
        from heatmap import terminal

        return getattr(terminal, name)
    if name == "render_png":
        from heatmap.png import render_png

        return render_png
    raise AttributeError(f"module 'heatmap' has no attribute {name!r}")
