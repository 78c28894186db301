"""The capacity report's page: one self-contained file (spark_reports.report_kit).

Reads only the plan dict (capacity.json) plus the per-minute series, so the
page shows exactly the figures in the JSON. Charts are interactive (plotly.js
inlined, see capacity_report.interactive) or, with ``static``, PNG pictures.
"""

from __future__ import annotations

import html
import platform

from capacity.figures import percent_near_one, significant
from capacity.usl import usl_throughput
from spark_reports import report_kit as kit

THEME_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:0}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em}th{background:#f4f4f4}
.pass{color:#fff;background:#2a7d2a;padding:.1em .5em;border-radius:3px}
.fail{color:#fff;background:#b22;padding:.1em .5em;border-radius:3px}
.big{font-size:1.3em}.muted{color:#666}code{background:#f4f4f4}.chart{min-height:380px}
"""

FORMULAS = [
    ("Availability", "A = MTBF / (MTBF + MTTR); budget = (1 - target) x period"),
    ("Replica reliability", "R = exp(-T k! R_rebuild^(k-1) / MTBF^k), T = 1 year; rebuild = disk x water / bandwidth"),
    ("USL", "X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); N* = sqrt((1-sigma)/kappa)"),
    ("Forecast", "V(Y) = V0 exp(g sum_{k=1..Y-Y0} phi^k); g = slope of log(messages) ~ year; phi 0.5 / 0.75 / 1 = low / mid / high"),
    ("Forecast peak", "measured peak msgs/s x growth band (measured year -> target year)"),
    ("Brokers", "max of: ceil(R/(c u)) + spares; ceil(R/(c (1-fuse))); domains; disk; network"),
    ("Disk", "peak-day msgs x size x retention/24h x replicas / water"),
    ("Little's law", "in flight L = rate x average latency"),
]  # fmt: skip


def _png(fig) -> str:
    return kit.img(kit.figure_png(fig, dpi=90, bbox_inches="tight"), "chart")


AT_RISK_LISTED = 50  # rows in the page; capacity.json has them all


def binding_sentence(rows: list[dict]) -> str:
    """Which at-risk broker binds: the least headroom (first in the ranked list)."""
    if not rows:
        return ""
    first = rows[0]
    return (f"{first['broker']} binds: the least headroom, {first.get('severity', 0):.1f}x "
            f"past its line ({first['reasons'][0]})")


def at_risk_html(rows: list[dict], brokers: int | None) -> list[str]:
    """The ranked list, least headroom first; names the broker that binds, says so when
    it is every broker, and what they share."""
    if not rows:
        return ["<p>None.</p>"]
    every = brokers is not None and len(rows) >= brokers
    shared = set.intersection(*(set(x.get("kinds", [])) for x in rows))
    head = (
        f"Every broker ({len(rows)} of {brokers}) is at risk"
        if every
        else f"{len(rows)} of {brokers} brokers"
        if brokers
        else f"{len(rows)} brokers"
    )
    if every and shared:
        head += f"; all of them for: {'; '.join(sorted(shared))}"
    head += f". {binding_sentence(rows)}"
    head += ". Least headroom first (severity: how far past its line the worst reason is)" + (
        f"; the first {AT_RISK_LISTED} shown, all in capacity.json"
        if len(rows) > AT_RISK_LISTED
        else ""
    )
    table = [{"rank": i + 1, "broker": r["broker"] + (" (binds)" if i == 0 else ""),
              "severity": f"{r.get('severity', 0):.1f}x", "why": "; ".join(r["reasons"])}
             for i, r in enumerate(rows[:AT_RISK_LISTED])]  # fmt: skip
    return [
        f"<p>{html.escape(head)}.</p>",
        _table(
            table, [("rank", "#"), ("broker", "broker"), ("severity", "severity"), ("why", "why")]
        ),
    ]


def forecast_chart(plan: dict) -> str:
    from spark_reports.capacity_report.interactive import forecast_title

    fc = plan["forecast"]
    with kit.figure(10, 3.6) as (fig, ax):
        hist = fc["history"]
        ax.plot([h["year"] for h in hist], [h["messages"] for h in hist], "ko",
                label="history (seeds)")  # fmt: skip
        years = [c["year"] for c in fc["curve"]]
        ax.fill_between(years, [c["low"] for c in fc["curve"]], [c["high"] for c in fc["curve"]],
                        alpha=0.2, label="band (low .. high)")  # fmt: skip
        ax.plot(years, [c["mid"] for c in fc["curve"]], "b-", label="mid (damped)")
        ax.set_yscale("log")
        ax.set_ylabel("messages on Double-11")
        ax.set_title(forecast_title(fc), fontsize=9 if fc.get("target_beyond_horizon") else None)
        ax.legend(loc="upper left")
        ax.grid(True, which="both", alpha=0.3)
        return _png(fig)


def usl_chart(plan: dict, points: tuple[list[float], list[float]] | None) -> str:
    usl = plan.get("usl")
    if not usl or not points:
        return _no_load_test(plan)
    import numpy as np

    n, x = points
    top = max(max(n), usl.get("peak_concurrency") or max(n)) * 1.3
    grid = np.linspace(1, top, 200)
    with kit.figure(10, 3.6) as (fig, ax):
        ax.plot(n, x, "ko", label="measured")
        ax.plot(grid, usl_throughput(grid, usl["sigma"], usl["kappa"], usl["lambda"]), "b-",
                label=f"USL fit (sigma {usl['sigma']:.3g}, kappa {usl['kappa']:.3g})")  # fmt: skip
        if usl.get("peak_concurrency"):
            ax.axvline(usl["peak_concurrency"], color="r", ls="--", label="peak concurrency")
        ax.set_xlabel("concurrency")
        ax.set_ylabel("msgs/s per broker")
        ax.set_title("Load test and Universal Scalability Law fit")
        ax.legend()
        ax.grid(True, alpha=0.3)
        return _png(fig)


def traffic_chart(plan: dict, minutes: list[dict]) -> str:
    if not minutes:
        return ""
    t = [m["minute"] for m in minutes]
    opts = plan["inputs"]["options"]
    with kit.figure(10, 6, rows=2) as (fig, (top, bottom)):
        top.plot(t, [m["peak_msgs_per_s"] for m in minutes], label="peak second of the minute")
        top.plot(t, [m["mean_msgs_per_s"] for m in minutes], label="mean")
        top.set_ylabel("cluster msgs/s")
        top.legend()
        top.grid(True, alpha=0.3)
        top.set_title("Measured send traffic and latency per minute")
        bottom.plot(t, [(m["max_us"] or 0) / 1e3 for m in minutes], "r-", label="max")
        bottom.plot(t, [(m["mean_us"] or 0) / 1e3 for m in minutes], "g-", label="mean")
        bottom.axhline(opts["sla_max_ms"], color="r", ls="--", lw=0.8)
        bottom.axhline(opts["sla_avg_ms"], color="g", ls="--", lw=0.8)
        bottom.set_yscale("log")
        bottom.set_ylabel("send latency, ms")
        bottom.legend()
        bottom.grid(True, alpha=0.3)
        fig.autofmt_xdate()
        return _png(fig)


def _table(rows: list[dict], columns: list[tuple[str, str]], fmt=None) -> str:
    """Columns as (key, header); ``fmt[key]`` formats a value, which keeps the
    alignment of the raw value (a formatted number still aligns right)."""
    fmt = fmt or {}

    def cell(key: str):
        def get(row: dict):
            v = row.get(key)
            if v is None or key not in fmt:
                return v
            numeric = isinstance(v, int | float) and not isinstance(v, bool)
            return kit.Num(fmt[key](v)) if numeric else fmt[key](v)

        return get

    return kit.table(rows, [(label, cell(key)) for key, label in columns])


def _badge(ok: bool) -> str:
    return '<span class="pass">PASS</span>' if ok else '<span class="fail">FAIL</span>'


def _peak(n: float | None) -> str:
    return "none (no retrograde region)" if n is None else f"{n:.1f}"


def _rate(v: float) -> str:
    """A measured rate: counted, so every digit is known."""
    return f"{v:,.0f}"


def _forecast(v: float) -> str:
    """A forecast rate: three significant figures (its band spans a factor of ten)."""
    return significant(v)


def _days_and_disk(plan: dict) -> str:
    """Daily peaks and the brokers whose disks reach the water level first."""
    days = _table(
        plan["days"],
        [("day", "day"), ("peak_msgs_per_s", "peak msgs/s"), ("peak_ts", "peak second"),
         ("mean_msgs_per_s", "mean msgs/s"), ("peak_to_mean", "peak / mean"),
         ("coverage", "day covered")],
        {"peak_msgs_per_s": _rate, "mean_msgs_per_s": _rate,
         "peak_to_mean": lambda x: f"{x:.2f}", "coverage": lambda x: f"{x:.0%}"},
    )  # fmt: skip
    disk = sorted(plan.get("disk", []), key=lambda d: d.get("hours_to_water") or float("inf"))
    if not disk:
        return days
    table = _table(
        disk[:10],
        [("broker", "broker"), ("used_fraction", "disk used"),
         ("growth_bytes_per_s", "growth MB/s"), ("hours_to_water", "hours to water")],
        {"used_fraction": lambda x: f"{x:.1%}", "growth_bytes_per_s": lambda x: f"{x / 1e6:.2f}",
         "hours_to_water": lambda x: f"{x:,.0f}"},
    )  # fmt: skip
    note = ("<p class=muted>Disk: the brokers that reach the water level first at the growth "
            "seen in broker_stats.</p>")  # fmt: skip
    return days + table + note


def _no_load_test(plan: dict) -> str:
    return "<p class=muted>No load test given (--load-test or --measured): per-broker capacity from " + html.escape(
        plan["inputs"]["per_broker_capacity_source"]) + ".</p>"  # fmt: skip


def _charts(plan: dict, minutes: list[dict], load_test, static: bool) -> dict[str, str]:
    if static:
        return {"forecast": forecast_chart(plan), "usl": usl_chart(plan, load_test),
                "traffic": traffic_chart(plan, minutes), "script": ""}  # fmt: skip
    from spark_reports.capacity_report.interactive import charts_html

    charts = charts_html(plan, minutes, load_test)
    charts["usl"] = charts["usl"] or _no_load_test(plan)
    return charts


def render(
    plan: dict, minutes: list[dict], load_test=None, versions: dict | None = None,
    static: bool = False,
) -> str:  # fmt: skip
    v, inp = plan["verdict"], plan["inputs"]
    charts = _charts(plan, minutes, load_test, static)
    fp, need, bind = v["forecast_peak_msgs_per_s"], v["brokers_needed"], v["binding_constraint"]
    parts = [f"<h1>Capacity plan for {html.escape(inp['target_date'])} {_badge(v['pass'])}</h1>"]
    parts.append(
        f"<p class=big>Forecast peak: low <b>{_forecast(fp['low'])}</b>, mid "
        f"<b>{_forecast(fp['mid'])}</b>, high <b>{_forecast(fp['high'])}</b> msgs/s. Brokers needed: <b>{need['mid']}</b> "
        f"(binding: {html.escape(bind['mid'])}; {need['low']} .. {need['high']} across the band); "
        f"{v['brokers_now']} today.</p>"
    )
    for warning in v.get("warnings", []):
        parts.append(f"<p class=muted>⚠ {html.escape(warning)}</p>")
    parts.append(_table(
        [{**c, "result": "PASS" if c["pass"] else "FAIL"} for c in v["checks"]],
        [("check", "check"), ("result", "result"), ("detail", "detail")],
    ))  # fmt: skip
    parts.append("<h2>Inputs and assumptions</h2>")
    opts = inp["options"]
    rows = [
        ("measured peak", f"{_rate(inp['measured_peak_msgs_per_s'])} msgs/s at {inp['measured_peak_ts']}", "metrics log (latency, op send)"),
        ("peak-to-mean", f"{inp['peak_to_mean']:.2f} (day coverage {inp['day_coverage']:.0%})", "metrics log"),
        ("message size", f"{inp['msg_bytes']:,.0f} B", "metrics log bytes / msgs"),
        ("per-broker capacity", f"{_rate(inp['per_broker_capacity'])} msgs/s", inp["per_broker_capacity_source"]),
        ("disk per broker", f"{inp['disk_bytes_per_broker'] / 1e12:,.2f} TB", "broker_stats disk_total_bytes (median) or --disk-tb"),
        ("growth to target", ", ".join(f"{k} x{g:.2f}" for k, g in plan["forecast"]["growth_band"].items()), "seed history, log-linear / damped"),
        ("SLA", f"{_forecast(v['sla_rate'])} msgs/s, avg {opts['sla_avg_ms']:g} ms, max {opts['sla_max_ms']:g} ms", f"rate: {v['sla_rate_source']}; latency: the Double-11 talk"),
        ("fuse reserve", f"{opts['fuse_reserve']:.0%}", "the Double-11 talk: isolate at most 30 %"),
        ("retention / water", f"{opts['retention_hours']:g} h at {opts['water']:.0%}", "the Double-11 talk"),
        ("fan-out", f"1 : {opts['fanout']:g}", "the Taobao talk: receive : deliver"),
        ("target utilisation", f"{opts['target_utilisation']:.0%}, {opts['failure_domains']} failure domains, {opts['replicas']} replicas", "options"),
        ("quarantined rows", str(inp["quarantined_rows"]), "schema rules (spark_reports.schema)"),
    ]  # fmt: skip
    parts.append(_table([dict(zip(("what", "value", "source"), r, strict=True)) for r in rows],
                        [("what", "input"), ("value", "value"), ("source", "source")]))  # fmt: skip
    parts.append("<h2>Forecast</h2>" + charts["forecast"])
    hf = plan["forecast"]["history_forecast"]
    parts.append(f"<p>History fitted on {hf['fitted_years']}: x{hf['growth_per_year']:.2f} a year; "
                 f"{hf['horizon_years']} year(s) beyond {hf['last_year']}"
                 + (f", more than the history supports: the band stops growing at "
                    f"{hf['supported_until']}" if hf.get("bounded") else "")
                 + ". The cluster's measured peak "
                 f"is scaled by the band's growth from {plan['forecast']['measured_year']} to "
                 f"{plan['forecast']['target_year']}.</p>")  # fmt: skip
    parts.append("<h2>Scalability (load test)</h2>" + charts["usl"])
    if plan.get("usl"):
        u = plan["usl"]
        parts.append(f"<p>sigma {u['sigma']:.4g}, kappa {u['kappa']:.4g}, lambda {u['lambda']:,.1f}; "
                     f"peak concurrency {_peak(u['peak_concurrency'])}; max throughput "
                     f"{_rate(u['max_throughput'] or 0)} msgs/s; R² {u['r_squared']:.4f}, "
                     f"MAPE {u['mape']:.2%}.</p>")  # fmt: skip
    parts.append("<h2>Measured traffic and latency</h2>" + charts["traffic"])
    parts.append(_days_and_disk(plan))
    ms = {
        k: (lambda x: f"{x:.3f}")
        for k in ("mean_ms", "p50_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms")
    }
    lat = sorted(plan["latency"], key=lambda r: (r["broker"] != "ALL", -r["p999_ms"]))[:11]
    parts.append(_table(lat, [("broker", "broker"), ("count", "sends"), ("mean_ms", "mean ms"),
                              ("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"),
                              ("p9999_ms", "p99.99"), ("max_ms", "max")], ms))  # fmt: skip
    parts.append(
        "<p class=muted>Cluster (ALL) first, then the 10 brokers with the worst p99.9. "
        "Quantiles are bucket upper bounds of the merged schema-3 histograms (≤ 4.4 % high).</p>"
    )
    parts.append("<h2>Sizing</h2>")
    rows = []
    for name in ("utilisation", "fuse", "failure_domain", "disk", "network"):
        row = {"constraint": name}
        for band in ("low", "mid", "high"):
            c = next(c for c in plan["sizing"][band]["constraints"] if c["name"] == name)
            row[band] = c["brokers"]
            row["why"] = c["why"]
        rows.append(row)
    parts.append(_table(rows, [("constraint", "constraint"), ("low", "low"), ("mid", "mid"),
                               ("high", "high"), ("why", "rule")]))  # fmt: skip
    mid = plan["sizing"]["mid"]
    parts.append(f"<p>Mid: disk {mid['disk_bytes_needed'] / 1e12:,.1f} TB raw; network in "
                 f"{mid['network_in_bits_per_s'] / 1e9:,.1f} Gbit/s, out {mid['network_out_bits_per_s'] / 1e9:,.1f} "
                 f"Gbit/s; utilisation at peak {mid['utilisation_at_peak']:.0%}; Little's law: "
                 f"{mid['in_flight_requests']:,.0f} sends in flight, {mid['clients_needed']} clients. "
                 f"For the SLA's {_forecast(v['sla_rate'])} msgs/s: {v['brokers_for_sla_rate']} brokers.</p>")  # fmt: skip
    parts.append("<h2>Brokers at risk</h2>")
    parts += at_risk_html(plan["at_risk"], v.get("brokers_now"))
    parts.append("<h2>Reliability and availability</h2>")
    pct = {"loss_probability": lambda x: f"{x:.2e}", "recovery_hours": lambda x: f"{x:.2f}"}
    # near 1: the decimals that give the loss two significant figures (capacity.figures)
    reliability = [{**r, "reliability": kit.Num(percent_near_one(r["reliability"], r["loss_probability"])),
                    "cluster_reliability": kit.Num(percent_near_one(r["cluster_reliability"]))}
                   for r in plan["reliability"]]  # fmt: skip
    parts.append(_table(reliability, [("replicas", "replicas"), ("reliability", "per group, 1 year"),
                 ("loss_probability", "loss probability"), ("masters", "masters"),
                 ("cluster_reliability", "whole cluster"), ("recovery_hours", "rebuild h")], pct))  # fmt: skip
    a = plan["availability"]
    drills = a.get("measured")
    how = (
        f"measured: median failover of {drills['drills']} drill(s), "
        f"{drills['lost']} acknowledged message(s) lost"
        if drills
        else "the Double-11 talk's assumption"
    )
    parts.append(f"<p>{a.get('replicas', '?')} copies of each message. "
                 f"Availability with MTBF {a['mtbf_s']:,.0f} s and MTTR {a['mttr_s']:g} s ({how}): "
                 f"{percent_near_one(a['availability'])} ({a['nines']:.2f} nines); target {a['target'] * 100:g} % "
                 f"allows {a['budget_s_per_period']:.2f} s a day.</p>")  # fmt: skip
    if a.get("modes"):  # drills of each mode: which one the night needs
        modes = [{**m, "availability": kit.Num(percent_near_one(m["availability"])),
                  "verdict": "meets" if m["target_met"] else "misses"} for m in a["modes"]]
        parts.append(_table(modes, [("mode", "mode"), ("mttr_s", "MTTR s (median)"),
                     ("drills", "drills"), ("lost", "acked and lost"), ("availability", "availability"),
                     ("downtime_s_per_period", "downtime s a day"), ("verdict", "target")],
                     {"mttr_s": lambda x: f"{x:.2f}", "downtime_s_per_period": lambda x: f"{x:.2f}"}))  # fmt: skip
        parts.append(f"<p>{html.escape(a['needs'])}.</p>")
    parts.append("<h2>What if (±20 %)</h2>")
    parts.append(_table(plan["what_if"], [("factor", "factor"), ("minus_20", "-20 %"), ("base", "base"),
                                          ("plus_20", "+20 %"), ("plus_20_binding", "binding at +20 %")]))  # fmt: skip
    parts.append("<h2>Appendix</h2>")
    versions = versions or {"python": platform.python_version()}
    parts.append(_table([{"what": k, "value": str(val)} for k, val in versions.items()],
                        [("what", "component"), ("value", "version")]))  # fmt: skip
    parts.append(
        _table(
            [{"what": k, "value": f} for k, f in FORMULAS],
            [("what", "model"), ("value", "formula")],
        )
    )
    parts.append(charts["script"])
    return kit.page(f"floodgate capacity plan {inp['target_date']}", THEME_CSS, parts)
