"""Interactive charts for the heatmap report, in one file that works offline.

plotly.js comes from the plotly package (installed from PyPI with floodgate)
and is inlined in the page: nothing is fetched when the report is opened. The
report's figures travel as one JSON block (sparse heatmap cells, percentile
curves, the 1-second cells of the worst spike windows); a short script turns
them into Plotly charts in the browser, so dense matrices never bloat the file.

Heatmap rows are schema-3 buckets, shown as their latency range; colour is
log10 of the count, the hover says time, bucket and count. Drill-downs: pick
a spike window (or click one in a broker's heatmap) to see its 1-second heatmap.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from heatmap.layout import bucket_index, bucket_lower, bucket_upper
from heatmap.sla import SLA_MAX_S, SLA_MEAN_S
from spark_reports.report_kit import json_block, log_axis_ms, plotly_js

__all__ = ["DATA_ID", "bucket_labels", "charts_html", "json_block", "plotly_js", "row_of", "sparse"]

DATA_ID = "floodgate-data"
DRILL_CELL_BUDGET = 200_000  # 1-second cells carried for drill-downs (~3 MB of JSON)


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    if ms >= 1000:
        return f"{ms / 1e3:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1e3:.3g} µs"


def bucket_labels(lo: int, hi: int) -> list[str]:
    """'(lower, upper]' of schema-3 buckets lo..hi, as the hover and the axis say them."""
    return [f"{_ms(bucket_lower(i))}–{_ms(bucket_upper(i))}" if bucket_lower(i) > 0
            else f"≤ {_ms(bucket_upper(i))}" for i in range(lo, hi + 1)]  # fmt: skip


def row_of(seconds: float, lo: int) -> float:
    """Row coordinate of a latency on the heatmap's bucket axis (row r spans r±0.5)."""
    i = bucket_index(seconds)  # the layout's bucket, and how far up it on the log scale
    low, high = bucket_lower(i), bucket_upper(i)
    up = (math.log(seconds / low) / math.log(high / low)) if low > 0 else 1.0
    return (i - lo) - 0.5 + up


def sparse(cells: pd.DataFrame, t0: int, step: int, lo: int) -> list[int]:
    """Flat [column, row, count, ...] of cells with columns t, bucket, count, in
    (column, row) order: the page is the same bytes whatever order Spark returned."""
    if cells.empty:
        return []
    cells = cells.sort_values(["t", "bucket"], kind="stable")
    col = (cells["t"].to_numpy(np.int64) - t0) // step
    row = cells["bucket"].to_numpy(np.int64) - lo
    n = cells["count"].to_numpy(np.int64)
    keep = n > 0
    return np.stack([col[keep], row[keep], n[keep]], axis=1).ravel().tolist()


def report_payload(d, epochs: np.ndarray) -> dict:
    """The JSON the page's script draws from (d: page.ReportData)."""
    drill_cells = getattr(d, "drill_cells", None)
    every = [d.cells] + ([drill_cells] if drill_cells is not None and len(drill_cells) else [])
    present = pd.concat([c.loc[c["count"] > 0, "bucket"] for c in every])
    lo, hi = (int(present.min()), int(present.max())) if len(present) else (0, 0)
    step = d.cells_window_s or d.window_s
    t0 = int(epochs[0]) if len(epochs) else 0
    maps = [{"name": name, "cells": sparse(d.cells[d.cells["broker"] == name], t0, step, lo)}
            for name in ["ALL", *d.worst_brokers]]  # fmt: skip
    curves = {"t": d.curves["t"].astype(int).tolist()}
    for name in ("mean", "p50", "p99", "p999", "max"):
        curves[name] = [None if v is None or not np.isfinite(v) else round(float(v) * 1e3, 4)
                        for v in d.curves[name].astype(float)]  # fmt: skip
    return {
        "op": d.op, "window_s": d.window_s, "step": step, "t0": t0, "columns": len(epochs),
        "lo": lo, "labels": bucket_labels(lo, hi),
        "sla": [{"name": f"{SLA_MEAN_S * 1e3:g} ms average", "ms": SLA_MEAN_S * 1e3,
                 "row": row_of(SLA_MEAN_S, lo)},
                {"name": f"{SLA_MAX_S * 1e3:g} ms max", "ms": SLA_MAX_S * 1e3,
                 "row": row_of(SLA_MAX_S, lo)}],
        "heatmaps": maps, "curves": curves, "drills": _drills(d, lo),
        "ms_axis": log_axis_ms([v for k in ("mean", "p50", "p99", "p999", "max")
                                for v in curves[k]] + [SLA_MEAN_S * 1e3, SLA_MAX_S * 1e3]),
    }  # fmt: skip


def _drills(d, lo: int) -> list[dict]:
    """The worst spike windows' 1-second cells, worst first, within the cell budget."""
    cells = getattr(d, "drill_cells", None)
    if cells is None or not len(cells):
        return []
    spikes = d.spikes.set_index(["broker", "t"])
    out, used = [], 0
    by_window = cells.assign(w=cells["t"] - cells["t"] % d.window_s).groupby(["broker", "w"])
    groups = {key: g for key, g in by_window}
    for broker, t0 in d.drills:
        g = groups.get((broker, t0))
        if g is None or used + len(g) > DRILL_CELL_BUDGET:
            continue
        used += len(g)
        mx = spikes["max"].get((broker, t0), np.nan)
        out.append({"broker": broker, "t0": int(t0), "columns": d.window_s,
                    "max_ms": None if not np.isfinite(mx) else round(float(mx) * 1e3, 3),
                    "cells": sparse(g, int(t0), 1, lo)})  # fmt: skip
    return out


def charts_html(d, epochs: np.ndarray) -> dict[str, str]:
    """HTML for each place a chart goes (div ids the script fills), plus the script."""
    payload = report_payload(d, epochs)
    brokers = "".join(f'<div class="chart" id="fg-heatmap-{i + 1}"></div>'
                      for i in range(len(d.worst_brokers)))  # fmt: skip
    options = "".join(
        f'<option value="{k}">{html.escape(x["broker"])} · window from '
        f"{pd.Timestamp(x['t0'], unit='s'):%Y-%m-%d %H:%M:%S} UTC · max {x['max_ms']} ms</option>"
        for k, x in enumerate(payload["drills"])
    )
    drill = (
        f'<p class=meta>The {len(payload["drills"])} worst spike windows, second by second '
        "(or click a spike in a broker's heatmap):</p>"
        f'<select id="fg-drill-pick">{options}</select><div class="chart" id="fg-drill"></div>'
        if payload["drills"] else "<p class=meta>No spike window to drill into.</p>"
    )  # fmt: skip
    return {
        "cluster": '<div class="chart" id="fg-heatmap-0"></div>',
        "curves": '<div class="chart" id="fg-curves"></div>',
        "brokers": f"<div class=grid>{brokers}</div>",
        "drill": drill,
        "script": json_block(DATA_ID, payload)
        + f"<script>{plotly_js()}</script><script>{PAGE_JS}</script>",
    }


# Builds the figures from the JSON block. Times are UTC strings built from
# epochs, so the axis and the hover read the same in every browser time zone.
PAGE_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('floodgate-data').textContent);
  const dark = {paper_bgcolor: '#10141a', plot_bgcolor: '#10141a', font: {color: '#e6e6e6'},
                margin: {l: 110, r: 20, t: 36, b: 40}};
  const utc = (s) => new Date(s * 1000).toISOString().slice(0, 19).replace('T', ' ');
  const fmt = new Intl.NumberFormat('en-US');
  const inferno = ['#000004', '#1b0c41', '#4a0c6b', '#781c6d', '#a52c60', '#cf4446', '#ed6925',
                   '#fb9b06', '#f7d13d', '#fcffa4'].map((c, i) => [i / 9, c]);
  function heatmap(el, cells, t0, step, ncol, title) {
    const nrow = D.labels.length, z = [], n = [];
    let most = 1;
    for (let r = 0; r < nrow; r++) { z.push(new Array(ncol).fill(null)); n.push(new Array(ncol).fill(0)); }
    for (let k = 0; k < cells.length; k += 3) {
      const c = cells[k], r = cells[k + 1], v = cells[k + 2];
      if (c >= 0 && c < ncol && r >= 0 && r < nrow) {
        z[r][c] = Math.log10(v); n[r][c] = fmt.format(v); most = Math.max(most, v);
      }
    }
    const x = Array.from({length: ncol}, (_, i) => utc(t0 + i * step));
    const top = Math.max(1, Math.ceil(Math.log10(most)));
    const ticks = Array.from({length: top + 1}, (_, i) => i);
    const shapes = D.sla.map((s) => ({type: 'line', xref: 'paper', x0: 0, x1: 1, y0: s.row, y1: s.row,
      line: {color: s.ms > 10 ? '#ff6b6b' : '#4da3ff', dash: 'dash', width: 1}}));
    const notes = D.sla.map((s) => ({xref: 'paper', x: 1, y: s.row, xanchor: 'right', yanchor: 'bottom',
      text: s.name, showarrow: false, font: {size: 10, color: s.ms > 10 ? '#ff6b6b' : '#4da3ff'}}));
    Plotly.newPlot(el, [{type: 'heatmap', x: x, y: D.labels, z: z, customdata: n, colorscale: inferno,
      zmin: 0, zmax: top, hoverongaps: false, xgap: 0, ygap: 0,
      colorbar: {title: {text: 'calls'}, tickvals: ticks, ticktext: ticks.map((i) => fmt.format(10 ** i))},
      hovertemplate: '%{x|%Y-%m-%d %H:%M:%S} UTC<br>%{y}<br>%{customdata} calls<extra></extra>'}],
      Object.assign({title: {text: title, font: {size: 14}}, height: 420, shapes: shapes, annotations: notes,
        xaxis: {type: 'date'}, yaxis: {type: 'category'}}, dark),
      {responsive: true, displaylogo: false});
  }
  D.heatmaps.forEach((h, i) => {
    const el = document.getElementById('fg-heatmap-' + i);
    if (!el) return;
    heatmap(el, h.cells, D.t0, D.step, D.columns, (i ? h.name : 'cluster') + ' · ' + D.op);
    if (i) el.on('plotly_click', (ev) => {
      const t = Date.parse(ev.points[0].x + 'Z') / 1000;
      const k = D.drills.findIndex((w) => w.broker === h.name && t >= w.t0 - D.step && t < w.t0 + w.columns);
      if (k >= 0) { pick.value = String(k); drill(k); pick.scrollIntoView({behavior: 'smooth'}); }
    });
  });
  const C = D.curves, x = C.t.map(utc);
  const styles = {max: '#d62728', p999: '#ff7f0e', p99: '#bcbd22', p50: '#2ca02c', mean: '#4da3ff'};
  const traces = Object.keys(styles).map((k) => ({type: 'scatter', mode: 'lines', name: k, x: x, y: C[k],
    line: {color: styles[k], width: k === 'mean' ? 2 : 1.2},
    hovertemplate: '%{x|%Y-%m-%d %H:%M:%S} UTC<br>' + k + ' %{y:.3f} ms<extra></extra>'}));
  Plotly.newPlot('fg-curves', traces, Object.assign({height: 380, hovermode: 'x unified',
    xaxis: {type: 'date', title: {text: 'UTC'}}, yaxis: Object.assign({title: {text: 'latency'}}, D.ms_axis),
    shapes: D.sla.map((s) => ({type: 'line', xref: 'paper', x0: 0, x1: 1, y0: s.ms, y1: s.ms,
      line: {color: s.ms > 10 ? '#ff6b6b' : '#4da3ff', dash: 'dash', width: 1}})),
    annotations: D.sla.map((s) => ({xref: 'paper', x: 1, y: Math.log10(s.ms), xanchor: 'right',
      yanchor: 'bottom', text: s.name, showarrow: false}))}, dark), {responsive: true, displaylogo: false});
  const pick = document.getElementById('fg-drill-pick');
  function drill(k) {
    const w = D.drills[k];
    heatmap('fg-drill', w.cells, w.t0, 1, w.columns, w.broker + ' · 1-second heatmap from ' + utc(w.t0) + ' UTC');
  }
  if (pick) { pick.addEventListener('change', () => drill(Number(pick.value))); drill(0); }
})();
"""
