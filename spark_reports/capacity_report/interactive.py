"""Interactive charts for the capacity report: the same three charts as the PNGs
(forecast band, load test with its USL fit, measured traffic and latency per
minute), as Plotly figures built here and drawn in the browser by plotly.js,
inlined from the plotly package (nothing fetched when the page opens)."""

from __future__ import annotations

import json

import numpy as np

from capacity.usl import usl_throughput
from spark_reports.report_kit import json_block, log_axis_ms, plotly_js

DATA_ID = "floodgate-capacity-charts"
LAYOUT = {"height": 380, "margin": {"l": 70, "r": 20, "t": 40, "b": 40}, "hovermode": "x unified"}


def _figure(traces: list, layout: dict) -> dict:
    import plotly.graph_objects as go

    fig = go.Figure(data=traces, layout={**LAYOUT, **layout})
    return json.loads(fig.to_json())  # plotly's own encoding (dates, numpy), as plain JSON


def forecast_title(fc: dict) -> str:
    """The forecast chart's title; says where the band stops when the target lies beyond."""
    title = "Double-11 volume: history and forecast band"
    if fc.get("target_beyond_horizon"):
        title += (f" (drawn to {fc['curve_end_year']}; the target {fc['target_year']} is beyond "
                  "what the history supports)")
    return title


def forecast_figure(plan: dict) -> dict:
    import plotly.graph_objects as go

    fc = plan["forecast"]
    years = [c["year"] for c in fc["curve"]]
    return _figure(
        [
            go.Scatter(x=years, y=[c["high"] for c in fc["curve"]], name="high", mode="lines",
                       line={"width": 0}, showlegend=False),
            go.Scatter(x=years, y=[c["low"] for c in fc["curve"]], name="band (low .. high)",
                       mode="lines", fill="tonexty", line={"width": 0}),
            go.Scatter(x=years, y=[c["mid"] for c in fc["curve"]], name="mid (damped)", mode="lines"),
            go.Scatter(x=[h["year"] for h in fc["history"]], y=[h["messages"] for h in fc["history"]],
                       name="history (seeds)", mode="markers", marker={"color": "black"}),
        ],  # fmt: skip
        {"title": {"text": forecast_title(fc)},
         "yaxis": {"type": "log", "dtick": 1, "exponentformat": "power",
                   "title": {"text": "messages on Double-11"}}},
    )  # fmt: skip


def usl_figure(plan: dict, points) -> dict | None:
    import plotly.graph_objects as go

    usl = plan.get("usl")
    if not usl or not points:
        return None
    n, x = points
    top = max(max(n), usl.get("peak_concurrency") or max(n)) * 1.3
    grid = np.linspace(1, top, 200)
    fit = usl_throughput(grid, usl["sigma"], usl["kappa"], usl["lambda"])
    shapes = []
    if usl.get("peak_concurrency"):
        shapes.append({"type": "line", "x0": usl["peak_concurrency"], "x1": usl["peak_concurrency"],
                       "yref": "paper", "y0": 0, "y1": 1, "line": {"color": "red", "dash": "dash"}})  # fmt: skip
    return _figure(
        [
            go.Scatter(x=list(n), y=list(x), name="measured", mode="markers"),
            go.Scatter(x=grid.tolist(), y=np.asarray(fit).tolist(), mode="lines",
                       name=f"USL fit (sigma {usl['sigma']:.3g}, kappa {usl['kappa']:.3g})"),
        ],  # fmt: skip
        {"title": {"text": "Load test and Universal Scalability Law fit"}, "shapes": shapes,
         "xaxis": {"title": {"text": "concurrency"}},
         "yaxis": {"title": {"text": "msgs/s per broker"}}},
    )  # fmt: skip


def traffic_figures(plan: dict, minutes: list[dict]) -> list[dict]:
    import plotly.graph_objects as go

    if not minutes:
        return []
    t = [m["minute"] for m in minutes]
    opts = plan["inputs"]["options"]
    rates = _figure(
        [go.Scatter(x=t, y=[m["peak_msgs_per_s"] for m in minutes], name="peak second of the minute"),
         go.Scatter(x=t, y=[m["mean_msgs_per_s"] for m in minutes], name="mean")],
        {"title": {"text": "Measured send traffic per minute"},
         "yaxis": {"title": {"text": "cluster msgs/s"}}},
    )  # fmt: skip
    lines = [(opts["sla_max_ms"], "red", f"{opts['sla_max_ms']:g} ms max"),
             (opts["sla_avg_ms"], "green", f"{opts['sla_avg_ms']:g} ms average")]  # fmt: skip
    latency = _figure(
        [go.Scatter(x=t, y=[(m["max_us"] or 0) / 1e3 for m in minutes], name="max",
                    line={"color": "red"}),
         go.Scatter(x=t, y=[(m["mean_us"] or 0) / 1e3 for m in minutes], name="mean",
                    line={"color": "green"})],
        {"title": {"text": "Send latency per minute"},
         "yaxis": {**log_axis_ms([(m[k] or 0) / 1e3 for m in minutes for k in ("max_us", "mean_us")]
                                 + [ms for ms, _, _ in lines]),
                   "title": {"text": "send latency"}},
         "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": ms, "y1": ms,
                     "line": {"color": c, "dash": "dash", "width": 1}} for ms, c, _ in lines],
         "annotations": [{"xref": "paper", "x": 1, "y": float(np.log10(ms)), "text": text,
                          "showarrow": False, "xanchor": "right", "yanchor": "bottom"}
                         for ms, _, text in lines]},
    )  # fmt: skip
    return [rates, latency]


def charts_html(plan: dict, minutes: list[dict], load_test) -> dict[str, str]:
    """HTML for each chart's place (divs the script fills) and the script itself."""
    figures = {"fc-forecast": forecast_figure(plan)}
    usl = usl_figure(plan, load_test)
    if usl is not None:
        figures["fc-usl"] = usl
    for i, fig in enumerate(traffic_figures(plan, minutes)):
        figures[f"fc-traffic-{i}"] = fig
    div = lambda key: f'<div class="chart" id="{key}"></div>' if key in figures else ""  # noqa: E731
    draw = (
        f"const F = JSON.parse(document.getElementById('{DATA_ID}').textContent);"
        "for (const [id, f] of Object.entries(F)) Plotly.newPlot(id, f.data, f.layout,"
        " {responsive: true, displaylogo: false});"
    )
    return {
        "forecast": div("fc-forecast"),
        "usl": div("fc-usl"),
        "traffic": div("fc-traffic-0") + div("fc-traffic-1"),
        "script": json_block(DATA_ID, figures) + f"<script>{plotly_js()}</script><script>{draw}</script>",
    }
