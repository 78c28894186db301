"""`floodgate capacity availability|reliability|usl|size|forecast`: the pure models
(`capacity measure`, which runs brokers: console.commands.capacity_measure_cmd)."""

from __future__ import annotations

import argparse
import math
import sys

from console.commands.common import (
    AT_LEAST_1,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    Range,
    add_subparser,
    checked,
    int_range,
    number,
    print_json,
)
from console.errors import CommandFailed, UsageError
from heatmap.sla import FUSE_CAP_RATIO

MAX_BROKERS = 10_000_000  # past this a sizing is a unit mistake, not a plan


def register(sub) -> None:
    parser = add_subparser(
        sub, "capacity", "capacity models: availability, replica reliability, sizing, USL, forecast; and "
        "measure"
    )
    models = parser.add_subparsers(dest="model", metavar="MODEL")

    p = add_subparser(models, "availability", "availability = MTBF / (MTBF + MTTR) and its budget")
    number(p, "--mtbf-s", POSITIVE, required=True, help="mean time between failures, s")
    mttr = p.add_mutually_exclusive_group(required=True)
    number(p, "--mttr-s", NON_NEGATIVE, group=mttr, help="mean time to recover, s (seed: 1)")
    mttr.add_argument("--from-drill", metavar="FILE", action="append",
                      help="MTTR measured: the median failover_s of `floodgate drill failover "
                      "--json` output (one result, a list of them, or {\"drills\": [...]}); "
                      "again for drills of another mode (controller, raft): the modes side "
                      "by side")
    number(p, "--target", FRACTION, default=0.99999, help="target availability (0.99999)")
    number(p, "--period-s", POSITIVE, default=86400.0, help="budget period, s (one day)")
    _json(p, run_availability)

    p = add_subparser(models, "reliability", "replica reliability from disk MTBF and rebuild time")
    p.add_argument("--replicas", default="1,2,3", help="comma-separated replica counts (1,2,3)")
    number(p, "--masters", AT_LEAST_1, type=int, default=1, help="independent replica groups (1)")
    number(p, "--disk-mtbf-hours", POSITIVE, default=1_200_000.0, help="disk MTBF, h")
    number(p, "--disk-tb", POSITIVE, default=1.0, help="disk size, TB (1)")
    number(p, "--water", FRACTION, default=0.75, help="disk water level (0.75)")
    number(p, "--rebuild-mbps", POSITIVE, default=100.0, help="rebuild bandwidth, MB/s")
    number(
        p, "--recovery-hours", NON_NEGATIVE, default=None,
        help="rebuild time, h (default: derived from disk size, water and bandwidth; the seed "
        "rounds 2.08 h to 2)",
    )  # fmt: skip
    number(p, "--years", POSITIVE, default=1.0, help="time horizon, years (1)")
    _json(p, run_reliability)

    p = add_subparser(models, "usl", "fit the Universal Scalability Law to load-test points")
    p.add_argument("--points", required=True, help="CSV with concurrency,throughput columns")
    _json(p, run_usl)

    p = add_subparser(models, "size", "brokers, disk and network for a target peak rate")
    number(p, "--target-rate", POSITIVE, required=True,
           help="peak msgs/s to carry (e.g. 10000000, the figure of Alibaba's Double-11 2016 "
           "RocketMQ talk)")  # fmt: skip
    rate = p.add_mutually_exclusive_group(required=True)
    number(p, "--per-broker-rate", POSITIVE, group=rate, help="measured msgs/s per broker")
    rate.add_argument("--load-test", help="USL points CSV: per-broker rate = fitted max throughput")
    number(p, "--utilisation", FRACTION, default=0.6, help="target utilisation (0.6)")
    number(p, "--fuse-reserve", Range(0, 1, high_open=True), default=FUSE_CAP_RATIO,
           help=f"fuse isolation cap ({FUSE_CAP_RATIO:g}, the Double-11 talk)")  # fmt: skip
    number(p, "--spares", NON_NEGATIVE, type=int, default=1, help="spare brokers, N+spares (1)")
    number(p, "--domains", AT_LEAST_1, type=int, default=3, help="failure domains (3)")
    number(p, "--msg-bytes", POSITIVE, default=1024.0, help="average message size (1024)")
    number(p, "--peak-day-messages", POSITIVE, default=None, help="messages on peak day")
    number(p, "--peak-to-mean", AT_LEAST_1, default=3.0, help="peak / daily-mean rate (3)")
    number(p, "--retention-hours", POSITIVE, default=72.0, help="retention, h (72)")
    number(p, "--replicas", AT_LEAST_1, type=int, default=2, help="copies of each message (2)")
    number(p, "--disk-tb", POSITIVE, default=4.0, help="disk per broker, TB (4)")
    number(p, "--water", FRACTION, default=0.75, help="disk water level (0.75)")
    number(p, "--fanout", POSITIVE, default=15.0, help="deliveries per message (15)")
    number(p, "--nic-gbps", POSITIVE, default=10.0, help="NIC per broker, Gbit/s (10)")
    number(p, "--nic-utilisation", FRACTION, default=0.7, help="NIC budget (0.7)")
    number(p, "--latency-ms", POSITIVE, default=3.0, help="average send latency (3)")
    number(p, "--client-concurrency", AT_LEAST_1, type=int, default=64,
           help="in flight per client")  # fmt: skip
    _json(p, run_size)

    p = add_subparser(
        models, "forecast", "Double-11 volume band from yearly history",
        epilog="A trend fitted on N years of history is extrapolated at most N years past "
        "its last year: a later --year gets the band at that bound, with a warning on stderr "
        "(--strict: exit 1 instead).",
    )  # fmt: skip
    p.add_argument("--history", default=None,
                   help="CSV year,messages[,source] (default: the RocketMQ design talk's "
                   "Double-11 figures, 2012-2016)")  # fmt: skip
    # years a Double-11 could be in: 2009 was the first; past 2100 is no forecast
    p.add_argument("--year", type=int_range(2009, 2100), required=True,
                   help="year to forecast")
    p.add_argument("--fit-until", type=int_range(2009, 2100), default=None,
                   help="use history up to this year only")
    number(p, "--peak-to-mean", AT_LEAST_1, default=None, help="also give peak msgs/s")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when --year lies past what the history supports")  # fmt: skip
    _json(p, run_forecast)

    from console.commands.capacity_measure_cmd import add_backlog, add_measure

    add_measure(models)
    add_backlog(models)


def _json(parser: argparse.ArgumentParser, func) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=checked(func))


def _clean(value):
    """JSON has no inf/nan (null), and a float keeps the 15 digits a double holds:
    rounded here, at the edge (capacity.figures.json_ready)."""
    from capacity.figures import json_ready

    return json_ready(value)


def run_availability(args) -> int:
    from capacity.availability import assess

    modes = _modes(args.from_drill) if args.from_drill else {}
    if len(modes) > 1:
        return _compare_modes(args, modes)
    measured = next(iter(modes.values()), None)
    mttr = measured.mttr_s if measured else args.mttr_s
    r = assess(args.mtbf_s, mttr, target=args.target, period_s=args.period_s)
    if args.json:
        doc = r.to_dict()
        if measured:
            doc["measured"] = measured.to_dict()
        print_json(_clean(doc))
        return 0
    if measured:
        print(f"MTTR measured     {measured.mttr_s:.3f} s (median of {measured.drills} failover "
              f"drill(s); {measured.lost} acknowledged message(s) lost)")
    from capacity.figures import percent_near_one

    verdict = "meets" if r.target_met else "MISSES"
    print(f"availability      {percent_near_one(r.availability)}  ({r.nines:.2f} nines)")
    print(f"downtime          {r.downtime_s_per_period:.3f} s per {r.period_s:g} s")
    print(f"target            {r.target * 100:g} % -> {verdict} (budget {r.budget_s_per_period:.3f} s)")
    print(f"max MTTR for it   {r.max_mttr_s_for_target:.3f} s at this MTBF")
    return 0


def _compare_modes(args, modes) -> int:
    """Drills of several modes: each one's availability at the same MTBF and target."""
    from capacity.figures import percent_near_one
    from capacity.recovery_modes import compare, needs

    verdicts = compare(args.mtbf_s, modes, target=args.target, period_s=args.period_s)
    said = needs(verdicts, args.mtbf_s, target=args.target)
    if args.json:
        print_json(_clean({"mtbf_s": args.mtbf_s, "target": args.target,
                           "period_s": args.period_s, "modes": [v.to_dict() for v in verdicts],
                           "needs": said}))
        return 0
    down = "down s/day" if args.period_s == 86400 else f"down s/{args.period_s:g}s"
    print(f"{'mode':<12} {'MTTR s':>8} {'drills':>6} {'lost':>5} {'availability':>14} "
          f"{down:>11}  target {args.target * 100:g} %")
    for v in verdicts:
        print(f"{v.mode:<12} {v.mttr_s:>8.3f} {v.drills:>6} {v.lost:>5} "
              f"{percent_near_one(v.availability):>14} {v.downtime_s_per_period:>11.3f}  "
              f"{'meets' if v.target_met else 'MISSES'}")
    print(said)
    return 0


def _modes(paths: list[str]):
    """mode -> MeasuredRecovery of the drill results in these files."""
    from capacity.errors import CapacityError
    from capacity.recovery_modes import read_modes

    try:
        return read_modes(paths)
    except CapacityError as exc:
        raise UsageError(str(exc)) from None


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} wants comma-separated integers, got {text!r}") from None
    if not values:
        raise UsageError(f"{flag} is empty")
    if min(values) < 1:
        raise UsageError(f"{flag} wants counts >= 1, got {min(values)}")
    return values


def run_reliability(args) -> int:
    from capacity.figures import percent_near_one
    from capacity.reliability import HOURS_PER_YEAR, rebuild_hours, table

    replicas = _int_list(args.replicas, "--replicas")
    recovery = args.recovery_hours
    if recovery is None:
        recovery = rebuild_hours(args.disk_tb, args.water, args.rebuild_mbps)
    rows = table(
        replicas, masters=args.masters, disk_mtbf_hours=args.disk_mtbf_hours,
        recovery_hours=recovery, hours=args.years * HOURS_PER_YEAR,
    )  # fmt: skip
    if args.json:
        print_json([_clean(r.to_dict()) for r in rows])
        return 0
    print(f"disk MTBF {args.disk_mtbf_hours:,.0f} h, recovery {recovery:.3f} h, {args.years:g} year(s)")
    print(f"{'replicas':>8}  {'reliability':>18}  {'loss probability':>16}  masters={args.masters}")
    for r in rows:  # near 1: the decimals that give the loss two significant figures
        print(
            f"{r.replicas:>8}  {percent_near_one(r.reliability, r.loss_probability):>18}"
            f"  {r.loss_probability:>16.2e}  cluster {percent_near_one(r.cluster_reliability)}"
        )
    return 0


def run_usl(args) -> int:
    from capacity.usl import fit_usl, read_points

    n, x = read_points(args.points)
    fit = fit_usl(n, x)
    if args.json:
        print_json(_clean(fit.to_dict()))
        return 0
    print(f"sigma {fit.sigma:.6g}  kappa {fit.kappa:.6g}  lambda {fit.lam:.6g}")
    peak = "none (kappa = 0)" if math.isinf(fit.peak_concurrency) else f"{fit.peak_concurrency:.1f}"
    print(f"peak concurrency {peak}  max throughput {fit.max_throughput:,.0f}")
    print(f"fit: R^2 {fit.r_squared:.4f}  RMSE {fit.rmse:,.1f}  MAPE {fit.mape:.2%}  ({fit.points} points)")
    return 0


def run_size(args) -> int:
    from capacity.sizing import SizingInputs, size

    per_broker = args.per_broker_rate
    if args.load_test:
        from capacity.usl import fit_usl, read_points

        per_broker = fit_usl(*read_points(args.load_test)).max_throughput
    if args.target_rate / per_broker > MAX_BROKERS:  # also catches inf (1e300 / 1e-300)
        raise UsageError(f"--target-rate {args.target_rate:g} over --per-broker-rate "
                         f"{per_broker:g} needs more than {MAX_BROKERS:,} brokers: check the "
                         "units (msgs/s)")
    plan = size(
        SizingInputs(
            target_rate=args.target_rate, per_broker_rate=per_broker,
            target_utilisation=args.utilisation, fuse_reserve=args.fuse_reserve,
            spares=args.spares, failure_domains=args.domains, msg_bytes=args.msg_bytes,
            peak_day_messages=args.peak_day_messages, peak_to_mean=args.peak_to_mean,
            retention_hours=args.retention_hours, replicas=args.replicas,
            disk_bytes_per_broker=args.disk_tb * 1e12, water=args.water, fanout=args.fanout,
            nic_bits_per_s=args.nic_gbps * 1e9, nic_utilisation=args.nic_utilisation,
            avg_latency_s=args.latency_ms / 1000.0, client_concurrency=args.client_concurrency,
        )
    )  # fmt: skip
    if args.json:
        print_json(_clean(plan.to_dict()))
        return 0
    print(f"brokers needed {plan.brokers} (binding: {plan.binding})")
    for c in plan.constraints:
        mark = "*" if c.name == plan.binding else " "
        print(f" {mark} {c.name:<15} {c.brokers:>7}  {c.why}")
    print(f"disk {plan.disk_bytes_needed / 1e12:,.1f} TB raw; network in "
          f"{plan.network_in_bits_per_s / 1e9:,.1f} Gbit/s, out {plan.network_out_bits_per_s / 1e9:,.1f} Gbit/s")  # fmt: skip
    print(f"utilisation at peak {plan.utilisation_at_peak:.1%}; in flight "
          f"{plan.in_flight_requests:,.0f} requests -> {plan.clients_needed} clients")  # fmt: skip
    return 0


def run_forecast(args) -> int:
    from capacity.figures import significant
    from capacity.forecast import forecast, read_history

    points = read_history(args.history)
    if args.fit_until is not None:
        points = [p for p in points if p.year <= args.fit_until]
    f = forecast(points, args.year)
    if f.bounded:  # past what the history supports: said (stderr), or refused
        if args.strict:
            raise CommandFailed(f"{f.bound_text()} (--strict)")
        print(f"floodgate capacity: warning: {f.bound_text()}", file=sys.stderr)
    out = f.to_dict()
    if args.peak_to_mean is not None:
        out["peak_rate"] = f.peak_rate(args.peak_to_mean)
    if args.json:
        print_json(_clean(out))
        return 0
    # a band spanning a factor of ten: three significant figures
    print(f"Double-11 {f.year}: low {f.low:.3g}  mid {f.mid:.3g}  high {f.high:.3g} messages")
    print(f"fitted on {f.fitted_years}: x{f.growth_per_year:.2f} a year; {f.horizon_years} year(s) "
          f"beyond {f.last_year} ({f.last_messages:.3g})")  # fmt: skip
    if f.bounded:
        print(f"bounded: the history supports {f.supported_until} at most; the band is "
              f"{f.growth_years} year(s) of growth, held from {f.supported_until} to {f.year}")
    if "peak_rate" in out:
        pr = {k: significant(v) for k, v in out["peak_rate"].items()}
        print(f"peak msgs/s: low {pr['low']}  mid {pr['mid']}  high {pr['high']}")
    return 0
