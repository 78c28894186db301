"""Heatmap matrices and their terminal and PNG renderers."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from rich.console import Console

from heatmap import (
    HeatmapError,
    LatencyHistogram,
    TerminalHeatmap,
    bucket_index,
    build_heatmap,
    heatmap_from_buckets,
    render_png,
)
from heatmap.terminal import colour_levels


def _series(n=60, spike_at=30, spike_s=0.8, seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        h = LatencyHistogram()
        h.record_many(rng.lognormal(-7.5, 0.4, 1000))
        if t == spike_at:
            h.record(spike_s)
        out.append((1_762_790_400 + t, h))
    return out


def test_matrix_rows_span_the_data_and_keep_exact_counts():
    series = _series()
    m = build_heatmap(series, schema=2)
    assert m.n_cols == 60
    assert m.counts.sum() == sum(h.count for _, h in series)
    assert m.row_bounds(m.n_rows - 1)[1] >= 0.8  # the spike's row is the top row
    assert m.counts[-1, 30] == 1 and m.counts[-1].sum() == 1


def test_limits_put_outliers_into_under_and_overflow_rows():
    m = build_heatmap(_series(), schema=2, lo_s=3e-4, hi_s=0.02)
    assert m.underflow and m.overflow
    assert m.row_label(0).startswith("≤") and m.row_label(m.n_rows - 1).startswith(">")
    assert m.counts[-1, 30] == 1  # the 800 ms spike is not clipped away
    assert m.counts.sum() == 60 * 1000 + 1


def test_from_buckets_downscales_exactly():
    maps = [{bucket_index(0.001): 5, bucket_index(0.0011): 2}]
    m = heatmap_from_buckets([0], maps, schema=0)
    assert m.counts.sum() == 7 and m.n_rows == 1  # both lie in (2**-10, 2**-9]


def test_mismatched_lengths_and_limits_are_errors():
    with pytest.raises(HeatmapError, match="times"):
        heatmap_from_buckets([0, 1], [{}])
    with pytest.raises(HeatmapError, match="below"):
        heatmap_from_buckets([0], [{1: 1}], lo_s=1.0, hi_s=0.5)


def _render(matrix, width=100) -> str:
    console = Console(width=width, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(TerminalHeatmap(matrix, title="send"))
    return cap.get()


def test_terminal_structure_labels_legend_and_visible_spike():
    m = build_heatmap(_series(), schema=2)
    text = _render(m)
    lines = text.splitlines()
    assert lines[0] == "send"
    grid = [line for line in lines if "│" in line]
    assert len(grid) == (m.n_rows + 1) // 2  # two latency rows per line
    assert grid[0].split("│")[0].strip() == m.row_label(m.n_rows - 1)  # slowest on top
    assert "ms" in text and "µs" in text
    assert lines[-1].startswith("count") and "log scale" in lines[-1]
    top_cells = grid[0].split("│", 1)[1]
    assert top_cells.strip() in ("▀", "▄")  # the lone 800 ms request is drawn
    assert top_cells.index(top_cells.strip()) == 30
    levels = colour_levels(m.counts)
    assert levels[-1, 30] >= 0 and (levels[-1] >= 0).sum() == 1


def test_terminal_compresses_columns_without_losing_counts():
    m = build_heatmap(_series(n=300, spike_at=299), schema=2)
    text = _render(m, width=60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert m.compress_columns(50).counts.sum() == m.counts.sum()


def test_empty_input_says_no_data():
    assert "no data" in _render(build_heatmap([], schema=2))


def test_png_is_an_image_and_shows_the_spike():
    import matplotlib.image as mpimg

    with_spike = render_png(build_heatmap(_series(), schema=2, lo_s=1e-5, hi_s=2.0))
    without = render_png(build_heatmap(_series(spike_at=-1), schema=2, lo_s=1e-5, hi_s=2.0))
    assert with_spike[:8] == b"\x89PNG\r\n\x1a\n"
    a = mpimg.imread(io.BytesIO(with_spike))[..., :3]
    b = mpimg.imread(io.BytesIO(without))[..., :3]
    assert a.shape == b.shape and a.shape[0] > 200
    changed = np.argwhere(np.abs(a - b).sum(axis=2) > 0.3)
    assert len(changed) > 0
    # the only difference sits in the upper part of the plot, where 800 ms is drawn
    assert changed[:, 0].mean() < a.shape[0] * 0.5


def test_cli_heatmap_show(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(
        "\n".join(json.dumps({"ts": t, **h.to_dict()}) for t, h in _series(n=20, spike_at=5))
    )
    cmd = [sys.executable, "-m", "console.cli", "heatmap", "show", "--input", str(path),
           "--width", "80"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # (the title wraps where the input's path is long: a worker's tmp dir under xdist)
    assert "20 columns" in " ".join(out.split()) and "count" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ts": 1, "count": 2, "buckets": {"3": 1}}\n')
    cmd[cmd.index(str(path))] = str(bad)
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0 and "bad.jsonl:1" in res.stderr
