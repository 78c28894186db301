"""PNG heatmap with matplotlib: time across, latency up (log-2 axis), count as
colour on a log scale, with the SLA lines of the Double-11 talk (3 ms average, 20 ms max)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from heatmap.matrix import HeatmapMatrix, format_seconds
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S


def render_png(
    matrix: HeatmapMatrix,
    path: str | Path | None = None,
    title: str = "",
    sla_lines_s: Sequence[float] = (SLA_MEAN_S, SLA_MAX_S),
    figsize: tuple[float, float] = (11.0, 4.0),
    dpi: int = 100,
) -> bytes:
    """Draw ``matrix``; returns the PNG bytes and writes them to ``path`` if given."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
    try:
        if matrix.n_rows == 0 or matrix.n_cols == 0 or not matrix.counts.any():
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        else:
            _draw(ax, matrix, sla_lines_s, LogNorm, fig)
        ax.set_title(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    data = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _row_edges(matrix: HeatmapMatrix) -> np.ndarray:
    """Row edges in seconds for a log axis: finite stand-ins for 0 and infinity."""
    lowers = [matrix.row_bounds(r)[0] for r in range(matrix.n_rows)]
    edges = np.array(lowers + [matrix.row_bounds(matrix.n_rows - 1)[1]], dtype=float)
    # the zero/underflow row starts at 0 and the overflow row ends at infinity:
    # draw them one row-height wide on the log axis.
    if edges[0] <= 0:
        edges[0] = edges[1] / 2 ** (1 / max(1, 2**matrix.schema))
    if not np.isfinite(edges[-1]):
        edges[-1] = edges[-2] * 2 ** (1 / max(1, 2**matrix.schema)) * 2
    return edges


def _draw(ax, matrix: HeatmapMatrix, sla_lines_s, LogNorm, fig) -> None:
    counts = matrix.counts.astype(float)
    masked = np.ma.masked_less_equal(counts, 0)
    y = _row_edges(matrix)
    times = list(matrix.times)
    if times and all(isinstance(t, int | float) and t > 1e9 for t in times):
        times = [datetime.fromtimestamp(t, tz=UTC) for t in times]  # epoch seconds
    if times and isinstance(times[0], datetime):
        import matplotlib.dates as mdates

        t = times
        step = (t[-1] - t[-2]) if len(t) > 1 else None
        x = t + [t[-1] + step] if step is not None else None
        if x is not None:
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    else:
        x = None
    if x is None:
        x = np.arange(matrix.n_cols + 1)
    mesh = ax.pcolormesh(x, y, masked, norm=LogNorm(vmin=1, vmax=max(1.0, counts.max())),
                         cmap="inferno", shading="flat")
    ax.set_yscale("log", base=2)
    ax.set_ylim(y[0], y[-1])
    ticks = (1e-6, 1e-5, 1e-4, 1e-3, SLA_MEAN_S, 1e-2, SLA_MAX_S, 1e-1, 1.0, 10.0)
    yticks = [v for v in ticks if y[0] <= v <= y[-1]]
    ax.set_yticks(yticks, [format_seconds(v) for v in yticks])
    for level in sla_lines_s:
        if y[0] <= level <= y[-1]:
            ax.axhline(level, color="#2ec4ff", linewidth=0.8, linestyle="--")
            ax.text(1.0, level, f" {format_seconds(level)}", color="#2ec4ff",
                    transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_ylabel("latency")
    fig.colorbar(mesh, ax=ax, label="count (log)", pad=0.06)
