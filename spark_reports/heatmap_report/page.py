"""The heatmap report's page: one self-contained file (spark_reports.report_kit),
dark enough for a war-room screen, opening with the verdict on the Double-11 talk's max."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from heatmap.layout import bucket_index, bucket_lower
from heatmap.sla import SLA_MAX_MS, SLA_MAX_S, SLA_MEAN_MS, SLA_MEAN_S
from spark_reports import report_kit as kit
from spark_reports.heatmap_report import charts, interactive

TOP_N = 10
MAX_TEXT = f"{SLA_MAX_MS:g} ms"  # "20 ms", as the page says it


@dataclass
class ReportData:
    title: str
    source: str
    first: datetime
    last: datetime
    window_s: int
    rows: int
    quarantined: dict[str, int]
    op: str
    cells: pd.DataFrame  # t, broker, bucket, count (cluster "ALL" and the worst brokers)
    worst_brokers: list[str]
    curves: pd.DataFrame  # t, count, mean, p50, p99, p999, max of the cluster
    ranking: (
        pd.DataFrame
    )  # broker, count, mean, p50..p999, max, over_20ms, spike_windows (incl. ALL)
    spikes: pd.DataFrame  # t, broker, max, p999, count
    spike_total: int
    cells_window_s: int = 0  # window of `cells` (coarser than window_s on long ranges); 0: window_s
    verdict: dict | None = None  # from heatmap_verdict: the report's first line
    table: str = "latency"  # the metrics-log table the report read (latency_1m: minute rollups)
    drills: list[tuple[str, int]] = field(default_factory=list)  # (broker, window start), worst first
    drill_cells: pd.DataFrame | None = None  # t, broker, bucket, count: 1 s cells of `drills`
    static: bool = False  # PNG pictures (print, e-mail) instead of interactive charts
    generated: datetime = field(default_factory=lambda: datetime.now(UTC))


THEME_CSS = """
body{background:#10141a;color:#e6e6e6;font:15px/1.45 system-ui,sans-serif;margin:24px}
h1{font-size:26px;margin:0 0 4px} h2{font-size:19px;margin:28px 0 8px;color:#9fd3ff}
.meta{color:#9aa4b2} .tiles{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.tile{background:#1b222c;border-radius:8px;padding:10px 16px;min-width:120px}
.tile b{display:block;font-size:22px} .tile span{color:#9aa4b2;font-size:13px}
.bad b{color:#ff6b6b} .ok b{color:#7bd88f}
.verdict{font-size:19px;font-weight:600;margin:8px 0} .verdict.bad{color:#ff6b6b} .verdict.ok{color:#7bd88f}
img{background:#fff;border-radius:6px} .grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.chart{min-height:380px} select{background:#1b222c;color:#e6e6e6;border:1px solid #2a3340;padding:4px}
td,th{border-bottom:1px solid #2a3340} th{color:#9fd3ff} .scroll{max-height:420px;overflow:auto}
"""


def heatmap_verdict(
    op: str,
    worst: dict | None,
    window_s: int,
    spike_total: int,
    spike_brokers: int,
    brokers: int,
    calls_over: int,
) -> dict:
    """PASS/FAIL on the Double-11 talk's max (20 ms), naming the worst broker and window, in one line.

    `worst`: the broker window with the highest max ({"broker", "t" epoch s, "max" s}).
    """  # fmt: skip
    if worst is None:
        return {"pass": None, "line": f"NO DATA: no {op} calls to judge", "op": op}
    at = f"{_when(worst['t'])} UTC ({window_s} s window)"
    max_s = float(worst["max"])
    ok = max_s <= SLA_MAX_S
    if ok:
        line = (
            f"PASS: no {op} over {MAX_TEXT}; worst {worst['broker']}, max {_ms(max_s)} at {at}, "
            f"{_ms(SLA_MAX_S - max_s)} under"
        )
    else:
        line = (
            f"FAIL: worst {worst['broker']}, {op} max {_ms(max_s)} at {at}, "
            f"{_ms(max_s - SLA_MAX_S)} over {MAX_TEXT}; {spike_total:,} spike "
            f"window{'s' * (spike_total != 1)} on {spike_brokers} of {brokers} brokers, "
            f"{calls_over:,} {op}s over {MAX_TEXT}"
        )
    return {
        "pass": ok, "line": line, "op": op, "broker": worst["broker"],
        "at": datetime.fromtimestamp(int(worst["t"]), tz=UTC).isoformat(), "window_s": window_s,
        "max_ms": round(max_s * 1e3, 3), "over_20ms_ms": round((max_s - SLA_MAX_S) * 1e3, 3),
        "spike_windows": spike_total, "brokers_with_spikes": spike_brokers,
        "calls_over_20ms": calls_over,
    }  # fmt: skip


def _ms(seconds) -> kit.Num:
    if seconds is None or (isinstance(seconds, float) and np.isnan(seconds)):
        return kit.Num("–")
    s = float(seconds)
    return kit.Num(f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms")


def _when(t) -> str:
    return datetime.fromtimestamp(int(t), tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(df: pd.DataFrame, columns: dict[str, callable]) -> str:
    return kit.table(df.to_dict("records"), list(columns.items()))


def _tile(value: str, label: str, state: str = "") -> str:
    return f'<div class="tile {state}"><b>{html.escape(value)}</b><span>{html.escape(label)}</span></div>'


def render_report(d: ReportData) -> str:
    cluster = d.ranking[d.ranking["broker"] == "ALL"]
    brokers = d.ranking[d.ranking["broker"] != "ALL"]
    c = cluster.iloc[0] if not cluster.empty else None
    epochs = _window_epochs(d)
    quarantined = sum(d.quarantined.values())
    pictures = _static_pictures(d, epochs) if d.static else interactive.charts_html(d, epochs)
    read = ("1-minute rollups (latency_1m)" if d.table == "latency_1m" else "1-second rows (latency)")

    parts = [
        f"<h1>{html.escape(d.title)}</h1>",
        _verdict_html(d.verdict),
        f'<div class="meta">{html.escape(d.source)} · {d.first:%Y-%m-%d %H:%M:%S} – {d.last:%Y-%m-%d %H:%M:%S} UTC'
        f" · window {d.window_s} s · {d.rows:,} {read}"
        f" · generated {d.generated:%Y-%m-%d %H:%M} UTC</div>",
        '<div class="tiles">',
    ]
    if c is not None:
        mean_ok = c["mean"] is not None and float(c["mean"]) <= SLA_MEAN_S
        parts += [
            _tile(f"{int(c['count']):,}", f"{d.op} calls"),
            _tile(_ms(c["mean"]), f"mean (SLA {SLA_MEAN_MS:g} ms)", "ok" if mean_ok else "bad"),
            _tile(_ms(c["p99"]), "p99"),
            _tile(_ms(c["p999"]), "p99.9"),
            _tile(_ms(c["max"]), f"max (SLA {MAX_TEXT})", "ok" if float(c["max"]) <= SLA_MAX_S else "bad"),
            _tile(
                f"{int(c['over_20ms']):,}",
                f"{d.op}s over {MAX_TEXT}",
                "ok" if c["over_20ms"] == 0 else "bad",
            ),
        ]
    parts += [
        _tile(
            f"{d.spike_total:,}",
            f"spike windows (max > {MAX_TEXT})",
            "ok" if d.spike_total == 0 else "bad",
        ),
        _tile(f"{quarantined:,}", "rows quarantined", "ok" if quarantined == 0 else "bad"),
        "</div>",
        f"<h2>Cluster heatmap ({html.escape(d.op)}, all brokers)</h2>",
        pictures["cluster"],
        "<h2>Percentiles over time</h2>",
        pictures["curves"],
        "<h2>Worst brokers by p99.9</h2>",
        pictures["brokers"],
    ]

    cols = {
        "broker": lambda r: str(r["broker"]),
        "calls": lambda r: int(r["count"]),
        "mean": lambda r: _ms(r["mean"]),
        "p50": lambda r: _ms(r["p50"]),
        "p99": lambda r: _ms(r["p99"]),
        "p99.9": lambda r: _ms(r["p999"]),
        "max": lambda r: _ms(r["max"]),
        f"over {MAX_TEXT}": lambda r: int(r["over_20ms"]),
        "spike windows": lambda r: int(r["spike_windows"]),
    }
    by_p999 = brokers.sort_values(["p999", "max"], ascending=False).head(TOP_N)
    by_over = brokers.sort_values(["over_20ms", "p999"], ascending=False).head(TOP_N)
    parts += [
        f"<h2>Top {TOP_N} brokers by p99.9</h2>",
        _table(by_p999, cols),
        f"<h2>Top {TOP_N} brokers by {html.escape(d.op)}s over {MAX_TEXT}</h2>",
        _table(by_over, cols),
        f"<p class=meta>Counted from histogram buckets whose lower bound is ≥ {MAX_TEXT}"
        f" (from {_ms(bucket_lower(bucket_index(SLA_MAX_S) + 1))}).</p>",
        f"<h2>Spikes: windows whose max exceeds {MAX_TEXT} ({d.spike_total:,})</h2>",
    ]
    if d.spike_total > len(d.spikes):
        parts.append(f"<p class=meta>First {len(d.spikes):,} listed; all are in percentiles/.</p>")
    spike_cols = {"window start (UTC)": lambda r: _when(r["t"])}
    spike_cols.update((name, cols[name]) for name in ("broker", "max", "p99.9", "calls"))
    parts.append(
        f'<div class="scroll">{_table(d.spikes, spike_cols)}</div>'
        if len(d.spikes)
        else "<p>None.</p>"
    )
    if "drill" in pictures:
        parts += ["<h2>Spike windows, second by second</h2>", pictures["drill"]]
    parts.append(f"<h2>Quarantined rows ({quarantined:,})</h2>")
    if d.quarantined:
        q = pd.DataFrame(sorted(d.quarantined.items()), columns=["reason", "rows"])
        parts.append(
            _table(q, {"reason": lambda r: r["reason"], "rows": lambda r: int(r["rows"])})
        )
        parts.append("<p class=meta>The rows themselves are in quarantine/ with their reason.</p>")
    else:
        parts.append("<p>None: every row passed the schema checks.</p>")
    parts.append(pictures.get("script", ""))
    return kit.page(d.title, THEME_CSS, parts)


def _static_pictures(d: ReportData, epochs: np.ndarray) -> dict[str, str]:
    """The PNG charts (`--static`: for print and e-mail, no script)."""
    lo_s, hi_s = charts.bucket_range(d.cells)
    all_cells = d.cells[d.cells["broker"] == "ALL"]
    brokers = [
        kit.img(charts.heatmap_png(d.cells[d.cells["broker"] == b], epochs, f"{b} · {d.op}",
                                   lo_s, hi_s), f"heatmap {b}")
        for b in d.worst_brokers
    ]  # fmt: skip
    curves = charts.percentile_png(d.curves, f"cluster {d.op} latency per {d.window_s} s window")
    return {
        "cluster": kit.img(charts.heatmap_png(all_cells, epochs, f"cluster · {d.op}", lo_s, hi_s),
                           "cluster heatmap"),
        "curves": kit.img(curves, "percentiles"),
        "brokers": f"<div class=grid>{''.join(brokers)}</div>",
    }  # fmt: skip


def _verdict_html(verdict: dict | None) -> str:
    if not verdict:
        return ""
    state = {True: "ok", False: "bad"}.get(verdict["pass"], "")
    return f'<p class="verdict {state}">{html.escape(verdict["line"])}</p>'


def _window_epochs(d: ReportData) -> np.ndarray:
    """Every window start from first to last, so gaps in the data show as gaps."""
    w = d.cells_window_s or d.window_s
    first = int(d.first.timestamp()) // w * w
    last = int(d.last.timestamp()) // w * w
    return np.arange(first, last + w, w)
