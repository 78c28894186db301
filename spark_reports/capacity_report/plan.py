"""From the capacity job's collected figures to the plan (capacity.json).

Pure Python over small lists of dicts (what the Spark steps collect), so the
arithmetic is testable without Spark. The `capacity` models do the maths;
this module decides which measured figure feeds which model and records
where every input came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import date

from capacity import availability as availability_model
from capacity import forecast as forecast_model
from capacity import recovery_modes
from capacity import reliability as reliability_model
from capacity.figures import json_ready
from capacity.quotas import plan_quotas
from capacity.sizing import SizingInputs, size
from capacity.usl import fit_usl
from heatmap import LatencyHistogram
from heatmap.metrics_log import histogram_from_row
from heatmap.sla import FUSE_CAP_RATIO, SLA_MAX_MS, SLA_MEAN_MS
from spark_reports.errors import ReportError

QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("p9999", 0.9999))

# The SLA rate the report checks by default is the cluster's own forecast peak (mid);
# `--sla-rate 10000000` checks the figure of Alibaba's Double-11 2016 RocketMQ talk
# (ten million messages a second), which fails any smaller cluster by design.
SLA_RATE_DEFAULT = "the cluster's forecast peak, mid"


@dataclass
class Options:
    target_date: date
    history: list  # capacity.forecast.HistoryPoint
    load_test: tuple[list[float], list[float]] | None = None
    measured: dict | None = None  # `floodgate capacity measure`'s cells.json
    measured_flush: str | None = None  # the cluster's flush mode: which measured cells apply
    per_broker_rate: float | None = None
    sla_rate: float | None = None  # None: the forecast peak (mid), see SLA_RATE_DEFAULT
    sla_avg_ms: float = SLA_MEAN_MS
    sla_max_ms: float = SLA_MAX_MS
    target_utilisation: float = 0.6
    fuse_reserve: float = FUSE_CAP_RATIO
    failure_domains: int = 3
    replicas: int = 2
    water: float = 0.75
    retention_hours: float = 72.0
    fanout: float = 15.0
    nic_gbps: float = 10.0
    disk_tb: float | None = None  # default: measured disk_total_bytes
    disk_mtbf_hours: float = reliability_model.SEED_DISK_MTBF_HOURS
    rebuild_mbps: float = 100.0
    mtbf_s: float = 86_399.0  # the Double-11 talk: one failure a day ...
    mttr_s: float = 1.0  # ... recovered in one second (or what failover drills measured)
    drills: dict | None = None  # capacity.availability.MeasuredRecovery.to_dict()
    modes: dict | None = None  # drills of several modes: mode -> MeasuredRecovery
    topic_shares: dict | None = None  # topic -> share of the peak (None: one '*' quota)
    quota_headroom: float = 0.2
    quota_warmup_s: float = 0.0
    sources: dict = field(default_factory=dict)


def histogram_from_rows(total: dict, buckets: dict[int, int]) -> LatencyHistogram | None:
    """A LatencyHistogram from a latency_totals row (µs) and merged bucket counts;
    None when the row counted no calls."""
    if not total.get("count"):
        return None
    return histogram_from_row({**total, "buckets": buckets})


def latency_table(totals: list[dict], buckets: list[dict]) -> list[dict]:
    """Per broker and ALL: count, mean, p50..p9999 and max in ms, by the quantile rule (docs/architecture.md)."""
    by_broker: dict[str, dict[int, int]] = {}
    for row in buckets:
        by_broker.setdefault(row["broker"], {})[int(row["bucket"])] = int(row["count"])
    out = []
    for total in totals:
        hist = histogram_from_rows(total, by_broker.get(total["broker"], {}))
        if hist is None:
            continue
        row = {"broker": total["broker"], "count": hist.count, "mean_ms": hist.mean * 1e3}
        for name, q in QUANTILES:
            row[f"{name}_ms"] = hist.quantile(q) * 1e3
        row["max_ms"] = hist.max * 1e3
        out.append(row)
    return out


def per_broker_capacity(opts: Options, brokers: list[dict], msg_bytes: float | None = None
                        ) -> tuple[float, str, dict | None]:
    """(msgs/s one broker sustains, where the figure comes from, the USL fit)."""
    if opts.per_broker_rate is not None:
        return opts.per_broker_rate, "--per-broker-rate (given)", None
    if opts.measured is not None:
        cell = measured_cell(opts.measured, msg_bytes, opts.measured_flush)
        k = cell["knee"]
        return float(k["send_tps"]), (
            f"measured (capacity measure): the knee of cell {cell['label']}, "
            f"{k['concurrency']} in flight at p99 {k['p99_ms']:.1f} ms"
            + (f", the cell nearest the traffic's {msg_bytes:,.0f}-byte messages"
               if msg_bytes else "")), cell.get("usl")
    if opts.load_test is not None:
        fit = fit_usl(*opts.load_test)
        rate = fit.max_throughput
        if not math.isfinite(rate):
            rate = max(opts.load_test[1])
        return rate, "USL fit of the load test: max throughput", fit.to_dict()
    observed = max((b["peak_msgs_per_s"] or 0) for b in brokers) if brokers else 0
    if observed <= 0:
        raise ReportError("no per-broker rate: give --load-test or --per-broker-rate")
    return float(observed), "highest observed per-broker second (no load test: a lower bound)", None


def measured_cell(doc: dict, msg_bytes: float | None, flush: str | None = None) -> dict:
    """The measured cell that stands for the cluster's traffic: of the cells with a knee
    (of `flush` when given), the nearest in message size (on a log scale), then in queue
    count to 1,024 (the talk's usual), then the lower knee: when both flush modes were
    measured and the cluster's is not said, the slower one stands."""
    cells = [c for c in doc.get("cells", []) if c.get("knee")
             and (flush is None or c["flush"] == flush)]
    if not cells:
        raise ReportError("the capacity measurement has no cell with a knee"
                          + (f" flushing {flush}" if flush else "")
                          + ": measure again, or give --per-broker-rate")
    size = msg_bytes or 1024.0
    return min(cells, key=lambda c: (round(abs(math.log(max(c["size"], 1) / size)), 6),
                                     abs(math.log(c["queues"] / 1024)),
                                     c["knee"]["send_tps"]))


def _measured_points(opts: Options, msg_bytes: float) -> dict | None:
    """The measured cell the capacity came from, with its steps' points (the USL chart)."""
    if opts.measured is None or opts.per_broker_rate is not None:
        return None
    cell = measured_cell(opts.measured, msg_bytes, opts.measured_flush)
    return {"label": cell["label"], "concurrency": [s["concurrency"] for s in cell["steps"]],
            "throughput": [s["send_tps"] for s in cell["steps"]]}


def _sizing_inputs(opts: Options, rate: float, capacity: float, msg_bytes: float,
                   peak_to_mean: float, disk_bytes: float) -> SizingInputs:  # fmt: skip
    return SizingInputs(
        target_rate=rate, per_broker_rate=capacity, target_utilisation=opts.target_utilisation,
        fuse_reserve=opts.fuse_reserve, failure_domains=opts.failure_domains, msg_bytes=msg_bytes,
        peak_to_mean=peak_to_mean, retention_hours=opts.retention_hours, replicas=opts.replicas,
        disk_bytes_per_broker=disk_bytes, water=opts.water, fanout=opts.fanout,
        nic_bits_per_s=opts.nic_gbps * 1e9, avg_latency_s=opts.sla_avg_ms / 1e3,
    )  # fmt: skip


def _median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v)
    return values[len(values) // 2] if values else None


def build_plan(measured: dict, opts: Options) -> dict:
    """Every figure of the report, JSON-ready. `measured` holds the collected frames."""
    days, brokers = measured["days"], measured["brokers"]
    if not days:
        raise ReportError("no send traffic in the input: nothing to plan from")
    peak_day = max(days, key=lambda d: d["peak_msgs_per_s"] or 0)
    measured_peak = float(peak_day["peak_msgs_per_s"])
    peak_to_mean = float(peak_day["peak_to_mean"] or 1.0)
    total_msgs = sum(d["total_msgs"] or 0 for d in days)
    total_bytes = sum(d["total_bytes"] or 0 for d in days)
    msg_bytes = total_bytes / total_msgs if total_msgs else 1024.0
    measured_year = peak_day["day"].year
    target_year = opts.target_date.year
    if opts.target_date < peak_day["day"]:
        raise ReportError(f"target date {opts.target_date} is before the measured peak day")

    growth = forecast_model.growth_band(opts.history, measured_year, target_year)
    forecast_peak = {k: measured_peak * g for k, g in growth.items()}
    history_forecast = forecast_model.forecast(
        opts.history, max(target_year, opts.history[-1].year)
    )

    capacity, capacity_source, usl = per_broker_capacity(opts, brokers, msg_bytes)
    if opts.measured is not None and opts.per_broker_rate is None:
        # the job read them against a capacity chosen before the traffic's size was known
        brokers = [{**b, "utilisation": (b.get("peak_msgs_per_s") or 0) / capacity}
                   for b in brokers]
    disk_totals = [d.get("disk_total_bytes") for d in measured.get("disk", [])]
    disk_bytes = opts.disk_tb * 1e12 if opts.disk_tb else (_median(disk_totals) or 4e12)
    base = _sizing_inputs(opts, forecast_peak["mid"], capacity, msg_bytes, peak_to_mean, disk_bytes)
    plans = {k: size(replace(base, target_rate=r)) for k, r in forecast_peak.items()}
    sla_rate = forecast_peak["mid"] if opts.sla_rate is None else opts.sla_rate
    sla_source = SLA_RATE_DEFAULT if opts.sla_rate is None else "--sla-rate (given)"
    sla_plan = size(replace(base, target_rate=sla_rate))

    what_if = []
    for label, change in (
        ("message size", lambda f: replace(base, msg_bytes=msg_bytes * f)),
        ("growth", lambda f: replace(base, target_rate=forecast_peak["mid"] * f)),
        ("per-broker rate", lambda f: replace(base, per_broker_rate=capacity * f)),
    ):
        low, high = size(change(0.8)), size(change(1.2))
        what_if.append({
            "factor": label, "minus_20": low.brokers, "minus_20_binding": low.binding,
            "base": plans["mid"].brokers, "plus_20": high.brokers, "plus_20_binding": high.binding,
        })  # fmt: skip

    latency = latency_table(measured["latency_totals"], measured["latency_buckets"])
    cluster_latency = next((r for r in latency if r["broker"] == "ALL"), None)
    brokers_now = len(brokers)
    # the continuous share, as capacity.sizing plans with (see brokers_for_fuse)
    usable_now = brokers_now * capacity * (1 - opts.fuse_reserve)
    checks = [
        _check(f"carries {sla_rate:,.0f} msgs/s"
               + (f" ({SLA_RATE_DEFAULT})" if opts.sla_rate is None else "")
               + f" with {opts.fuse_reserve:.0%} isolated",
               usable_now >= sla_rate,
               f"{brokers_now} brokers x {capacity:,.0f} x {1 - opts.fuse_reserve:.0%} = {usable_now:,.0f} msgs/s"),
        _check(f"forecast peak (mid) on {opts.target_date} fits the current cluster",
               brokers_now >= plans["mid"].brokers,
               f"{brokers_now} brokers now, {plans['mid'].brokers} needed ({plans['mid'].binding} binds)"),
    ]  # fmt: skip
    if cluster_latency:
        checks.append(_check(f"average send <= {opts.sla_avg_ms:g} ms",
                             cluster_latency["mean_ms"] <= opts.sla_avg_ms,
                             f"measured {cluster_latency['mean_ms']:.3f} ms"))  # fmt: skip
        checks.append(_check(f"max send <= {opts.sla_max_ms:g} ms",
                             cluster_latency["max_ms"] <= opts.sla_max_ms,
                             f"measured {cluster_latency['max_ms']:.1f} ms"))  # fmt: skip

    recovery = reliability_model.rebuild_hours(disk_bytes / 1e12, opts.water, opts.rebuild_mbps)
    masters = max(1, math.ceil(plans["mid"].brokers / opts.replicas))
    reliability = reliability_model.table(
        [1, 2, 3], masters=masters, disk_mtbf_hours=opts.disk_mtbf_hours, recovery_hours=recovery
    )
    availability = availability_model.assess(opts.mtbf_s, opts.mttr_s)

    warnings = []
    if history_forecast.bounded:
        warnings.append(
            f"the forecast runs {history_forecast.horizon_years} years beyond the last year of "
            f"history: {history_forecast.bound_text()}, so the growth from {measured_year} to "
            f"{target_year} is x{growth['high']:.2f} at most; add recent years (--history)"
        )
    if (peak_day["coverage"] or 0) < 0.99:
        warnings.append(
            f"the peak day has {peak_day['coverage']:.0%} of its seconds in the log: "
            "the peak-to-mean ratio uses the mean of the seconds seen"
        )
    if "observed" in capacity_source:
        warnings.append(
            "no load test: per-broker capacity is the busiest observed second, a lower bound"
        )
    return _clean({
        "verdict": {
            "warnings": warnings,
            "pass": all(c["pass"] for c in checks),
            "checks": checks,
            "forecast_peak_msgs_per_s": forecast_peak,
            "brokers_needed": {k: p.brokers for k, p in plans.items()},
            "binding_constraint": {k: p.binding for k, p in plans.items()},
            "brokers_now": brokers_now,
            "sla_rate": sla_rate,
            "sla_rate_source": sla_source,
            "brokers_for_sla_rate": sla_plan.brokers,
        },
        "inputs": {
            "target_date": opts.target_date.isoformat(),
            "measured_peak_day": peak_day["day"].isoformat(),
            "measured_peak_msgs_per_s": measured_peak,
            "measured_peak_ts": str(peak_day["peak_ts"]),
            "peak_to_mean": peak_to_mean,
            "day_coverage": peak_day["coverage"],
            "msg_bytes": msg_bytes,
            "per_broker_capacity": capacity,
            "per_broker_capacity_source": capacity_source,
            "disk_bytes_per_broker": disk_bytes,
            "quarantined_rows": measured.get("quarantined", 0),
            "options": {k: v for k, v in vars(opts).items()
                        if k not in ("history", "load_test", "sources", "target_date")},
            "sources": opts.sources,
        },  # fmt: skip
        "forecast": {
            "growth_band": growth,
            "measured_year": measured_year,
            "target_year": target_year,
            "history": [vars(p) for p in opts.history],
            "history_forecast": history_forecast.to_dict(),
            "curve": forecast_curve(opts.history, target_year),
            "curve_end_year": curve_end_year(opts.history, target_year),
            "supported_until": history_forecast.supported_until,
            "target_beyond_horizon": target_year > curve_end_year(opts.history, target_year),
        },
        "usl": usl,
        "measured_cell": _measured_points(opts, msg_bytes),
        "quotas": {
            "basis": "forecast peak (high band) per topic, with headroom; `floodgate quota "
                     "apply` divides each by the brokers left when the fuse holds its share out",
            "fuse_reserve": opts.fuse_reserve,
            "topics": [q.to_dict() for q in plan_quotas(
                forecast_peak["high"], opts.topic_shares, opts.quota_headroom,
                warmup_s=opts.quota_warmup_s)],
        },
        "sizing": {k: p.to_dict() for k, p in plans.items()},
        "sizing_sla_rate": sla_plan.to_dict(),
        "what_if": what_if,
        "latency": latency,
        "days": days,
        "brokers": brokers,
        "disk": measured.get("disk", []),
        "spikes": measured.get("spikes", []),
        "at_risk": brokers_at_risk({**measured, "brokers": brokers}, opts),
        "reliability": [r.to_dict() for r in reliability],
        "availability": {**availability.to_dict(), "replicas": opts.replicas,
                         "measured": opts.drills,
                         **recovery_modes.side_by_side(opts.mtbf_s, opts.modes)},
    })  # fmt: skip


def curve_end_year(history: list, target_year: int) -> int:
    """The last year the chart draws: the target, or the last year the history supports
    (capacity.forecast.supported_until) when the target lies further: past it the band
    is held at the bound, not drawn on as if it were a forecast."""
    last = history[-1].year
    return max(last, min(target_year, forecast_model.supported_until(history)))


def forecast_curve(history: list, target_year: int) -> list[dict]:
    """Yearly low/mid/high from the last year of history to curve_end_year (the chart's)."""
    return [
        {"year": y, **{k: getattr(f, k) for k in ("low", "mid", "high")}}
        for y in range(history[-1].year, curve_end_year(history, target_year) + 1)
        for f in [forecast_model.forecast(history, y)]
    ]


def _check(name: str, ok: bool, detail: str) -> dict:
    return {"check": name, "pass": bool(ok), "detail": detail}


SPIKES, HOT, DISK = (
    "latency spikes",
    "peak above the target utilisation",
    "disk fills before retention",
)


def brokers_at_risk(measured: dict, opts: Options) -> list[dict]:
    """Brokers with SLA spikes, a peak above the target utilisation, or a disk filling too
    soon, ranked by headroom: ``severity`` is how far past its line the broker's worst
    reason is (worst spike / SLA max, utilisation / target, retention / hours to water),
    so the broker with the least headroom comes first and ``binds``: it is the one that
    fails first as load grows, and the ranking still says something when every broker
    is on the list. Ties: more reasons first, then by name."""
    risk: dict[str, list[tuple[float, str, str]]] = {}
    for s in measured.get("spikes", []):
        n = s.get("spike_seconds", s.get("spike_windows"))
        unit = "s" if "spike_seconds" in s else ("window" if n == 1 else "windows")
        worst_ms = s["worst_max_us"] / 1e3
        risk.setdefault(s["broker"], []).append(
            (
                worst_ms / opts.sla_max_ms,
                SPIKES,
                f"{n} {unit} over {opts.sla_max_ms:g} ms (worst {worst_ms:.0f} ms)",
            )
        )
    for b in measured["brokers"]:
        u = b.get("utilisation")
        if u is not None and u > opts.target_utilisation:
            risk.setdefault(b["broker"], []).append(
                (u / opts.target_utilisation, HOT, f"peak at {u:.0%} of capacity")
            )
    for d in measured.get("disk", []):
        h = d.get("hours_to_water")
        if h is not None and h < opts.retention_hours:
            risk.setdefault(d["broker"], []).append((
                opts.retention_hours / max(h, 1e-3), DISK,
                f"disk at {opts.water:.0%} water in {h:.0f} h (< {opts.retention_hours:g} h retention)",
            ))  # fmt: skip
    rows = [{"broker": b, "reasons": [text for _, _, text in sorted(r, reverse=True)],
             "kinds": sorted({kind for _, kind, _ in r}),
             "severity": max(x for x, _, _ in r)} for b, r in risk.items()]  # fmt: skip
    rows.sort(key=lambda r: (-r["severity"], -len(r["reasons"]), r["broker"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"], row["binds"] = rank, rank == 1
    return rows


def _clean(value):
    """JSON-safe, rounded at the edge (capacity.figures.json_ready): floats to 15
    significant digits, dates as ISO strings, inf/nan as null, tuples as lists."""
    return json_ready(value)
