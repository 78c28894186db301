"""PNG pictures for the report: heatmaps through `heatmap`'s renderer, and the
percentile curves against seed 000's SLA lines (3 ms average, 20 ms max)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pandas as pd

MAX_HEATMAP_COLUMNS = 1200  # wider matrices are merged column-wise (exact counts)


def bucket_range(cells: pd.DataFrame) -> tuple[float | None, float | None]:
    """A shared latency axis (lo_s, hi_s) for all heatmaps of one report."""
    present = cells.loc[cells["count"] > 0, "bucket"]
    if present.empty or present.min() == present.max():
        return None, None
    return 2.0 ** (present.min() / 8) * 0.999, 2.0 ** (present.max() / 8)


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
    return heatmap.render_png(matrix, title=title, sla_lines_s=(0.003, 0.020))


def percentile_png(curves: pd.DataFrame, title: str, sla_avg_s=0.003, sla_max_s=0.020) -> bytes:
    """curves: t (epoch s), mean, p50, p99, p999, max (seconds), one row per window."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11.0, 4.0), dpi=100)
    try:
        if curves.empty:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        else:
            x = [datetime.fromtimestamp(int(t), tz=UTC) for t in curves["t"]]
            styles = {
                "max": ("#d62728", 0.8),
                "p999": ("#ff7f0e", 1.2),
                "p99": ("#bcbd22", 1.2),
                "p50": ("#2ca02c", 1.2),
                "mean": ("#1f77b4", 1.6),
            }
            for name, (colour, width) in styles.items():
                ax.plot(
                    x, curves[name].astype(float) * 1e3, label=name, color=colour, linewidth=width
                )
            ax.axhline(sla_avg_s * 1e3, color="#1f77b4", linestyle="--", linewidth=0.9)
            ax.axhline(sla_max_s * 1e3, color="#d62728", linestyle="--", linewidth=0.9)
            ax.text(1.0, sla_avg_s * 1e3, " 3 ms avg", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8, color="#1f77b4")  # fmt: skip
            ax.text(1.0, sla_max_s * 1e3, " 20 ms max", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8, color="#d62728")  # fmt: skip
            ax.set_yscale("log")
            ax.set_ylabel("latency (ms)")
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
            ax.legend(loc="upper left", ncol=5, fontsize=8)
            ax.grid(True, which="major", alpha=0.3)
        ax.set_title(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return buf.getvalue()
