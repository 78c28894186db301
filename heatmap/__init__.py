"""The one latency-histogram type of floodgate, heatmap matrices and renderers.

`LatencyHistogram` is what brokers record into, Prometheus exports, Spark
merges and the console draws (layout: DESIGN.md). Renderers import their
heavy libraries lazily: `TerminalHeatmap` needs Rich, `render_png` matplotlib.
"""

from heatmap.errors import HeatmapError
from heatmap.histogram import (
    SCHEMA,
    ZERO_INDEX,
    ZERO_THRESHOLD,
    LatencyHistogram,
    bucket_index,
    bucket_lower,
    bucket_upper,
    zero_index,
)
from heatmap.matrix import HeatmapMatrix, build_heatmap, format_seconds, heatmap_from_buckets

__all__ = [
    "SCHEMA",
    "ZERO_INDEX",
    "ZERO_THRESHOLD",
    "HeatmapError",
    "HeatmapMatrix",
    "LatencyHistogram",
    "TerminalHeatmap",
    "bucket_index",
    "bucket_lower",
    "bucket_upper",
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
