"""PNG pictures for the report: heatmaps through `heatmap`'s renderer, and the
percentile curves against the Double-11 talk's SLA lines (3 ms average, 20 ms max)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd

from heatmap.layout import bucket_upper
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S
from spark_reports import report_kit as kit

MAX_HEATMAP_COLUMNS = 1200  # wider matrices are merged column-wise (exact counts)


def bucket_range(cells: pd.DataFrame) -> tuple[float | None, float | None]:
    """A shared latency axis (lo_s, hi_s) for all heatmaps of one report."""
    present = cells.loc[cells["count"] > 0, "bucket"]
    if present.empty or present.min() == present.max():
        return None, None
    return bucket_upper(int(present.min())) * 0.999, bucket_upper(int(present.max()))


def heatmap_png(cells: pd.DataFrame, epochs: np.ndarray, title: str, lo_s=None, hi_s=None) -> bytes:
    """cells: t (epoch s), bucket, count of one broker; one column per epoch in `epochs`."""
    import heatmap

    by_time = {int(t): dict(zip(g["bucket"].astype(int), g["count"].astype(int), strict=True))
               for t, g in cells.groupby("t")}  # fmt: skip
    times = [datetime.fromtimestamp(int(t), tz=UTC) for t in epochs]
    maps = [by_time.get(int(t), {}) for t in epochs]
    matrix = heatmap.heatmap_from_buckets(
        times, maps, schema=2, source_schema=3, lo_s=lo_s, hi_s=hi_s
    )
    matrix = matrix.compress_columns(MAX_HEATMAP_COLUMNS)
    return heatmap.render_png(matrix, title=title, sla_lines_s=(SLA_MEAN_S, SLA_MAX_S))


def percentile_png(
    curves: pd.DataFrame, title: str, sla_avg_s: float = SLA_MEAN_S, sla_max_s: float = SLA_MAX_S
) -> bytes:
    """curves: t (epoch s), mean, p50, p99, p999, max (seconds), one row per window."""
    with kit.figure(11.0, 4.0, dpi=100) as (fig, ax):
        if curves.empty:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        else:
            _draw_curves(ax, curves, sla_avg_s, sla_max_s)
        ax.set_title(title)
        fig.tight_layout()
        return kit.figure_png(fig)


def _draw_curves(ax, curves: pd.DataFrame, sla_avg_s: float, sla_max_s: float) -> None:
    import matplotlib.dates as mdates

    x = [datetime.fromtimestamp(int(t), tz=UTC) for t in curves["t"]]
    styles = {
        "max": ("#d62728", 0.8),
        "p999": ("#ff7f0e", 1.2),
        "p99": ("#bcbd22", 1.2),
        "p50": ("#2ca02c", 1.2),
        "mean": ("#1f77b4", 1.6),
    }
    for name, (colour, width) in styles.items():
        ax.plot(x, curves[name].astype(float) * 1e3, label=name, color=colour, linewidth=width)
    for level_s, label, colour in ((sla_avg_s, "avg", "#1f77b4"), (sla_max_s, "max", "#d62728")):
        ax.axhline(level_s * 1e3, color=colour, linestyle="--", linewidth=0.9)
        ax.text(1.0, level_s * 1e3, f" {level_s * 1e3:g} ms {label}",
                transform=ax.get_yaxis_transform(), va="center", fontsize=8, color=colour)  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
    ax.legend(loc="upper left", ncol=5, fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
