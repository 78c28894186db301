"""The capacity job: metrics log -> capacity.json and a self-contained report.html.

    spark-submit spark_reports/jobs/capacity.py --input LOG --target-date 2027-11-11 --out OUT
    floodgate report capacity --input LOG --target-date 2027-11-11 --out OUT

The Spark steps are the pure functions of `spark_reports.capacity_report.frames`;
this module owns the session, the paths, collecting the small results and
writing the outputs (temp file + atomic rename). Both commands exit 1 on a
FAIL verdict, after writing the outputs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import date
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from heatmap.sla import SLA_MAX_MS  # noqa: E402
from spark_reports.errors import EmptyInput, ReportError  # noqa: E402

RATE_FIELDS = ("peak_msgs_per_s", "mean_msgs_per_s")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="metrics log directory (latency/, broker_stats/)")
    p.add_argument("--out", required=True, help="output directory (capacity.json, report.html)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out (refused otherwise)")
    p.add_argument("--target-date", required=True, help="Double-11 to plan for, YYYY-MM-DD")
    p.add_argument("--history", default=None, help="CSV year,messages (default: seed history)")
    p.add_argument("--load-test", default=None, help="CSV concurrency,throughput of one broker")
    p.add_argument("--measured", default=None, metavar="DIR",
                   help="output of `floodgate capacity measure`: per-broker capacity is the "
                   "knee of the cell nearest the traffic's message size")
    p.add_argument("--flush", choices=("async", "sync"), default=None,
                   help="with --measured: the cluster's flush mode (default: of the cells "
                   "measured, the lower knee)")
    p.add_argument(
        "--per-broker-rate", type=float, default=None, help="msgs/s per broker (overrides)"
    )
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="Spark Connect server, sc://HOST:PORT (default: $SPARK_REMOTE; `floodgate spark up` starts one)")
    p.add_argument(
        "--heatmap", default=None, metavar="DIR",
        help="output of `report heatmap`: take brokers at risk from its spike list "
        f"(default: {SLA_MAX_MS:g} ms spikes per second from the log)",
    )  # fmt: skip
    p.add_argument("--op", default="send", help="operation that carries the traffic (send)")
    p.add_argument(
        "--sla-rate", "--target-rate", dest="sla_rate", type=float, default=None, metavar="MSGS_S",
        help="msgs/s the cluster must carry with the fuse's share held out (default: the "
        "cluster's own forecast peak, mid band); e.g. --target-rate 10000000, the figure of "
        "Alibaba's Double-11 2016 RocketMQ talk, which a smaller cluster fails by design",
    )  # fmt: skip
    p.add_argument("--replicas", type=int, default=2, help="copies of each message (2)")
    p.add_argument("--domains", type=int, default=3, help="failure domains (3)")
    p.add_argument("--utilisation", type=float, default=0.6, help="target utilisation (0.6)")
    p.add_argument(
        "--disk-tb", type=float, default=None, help="disk per broker (default: measured)"
    )
    p.add_argument("--from-drill", default=None, metavar="FILE", action="append",
                   help="MTTR from failover drills (`floodgate drill failover --json` output "
                   "or bench/ha_failover.py --json) instead of the Double-11 talk's 1 s; "
                   "again for another mode's drills (controller, raft): the modes compared")  # fmt: skip
    p.add_argument("--topic-share", default=None, metavar="TOPIC=SHARE[,…]",
                   help="how the peak splits over topics, for the plan's flow-control quotas "
                   "(default: one quota '*', every topic up to the whole peak)")  # fmt: skip
    p.add_argument("--quota-headroom", type=float, default=0.2, metavar="SHARE",
                   help="quotas admit this much over the planned peak (0.2)")  # fmt: skip
    p.add_argument("--quota-warmup", type=float, default=0.0, metavar="SECONDS",
                   help="quotas ease traffic in over this long after a cold start (0: off)")  # fmt: skip
    p.add_argument("--static", action="store_true",
                   help="PNG pictures (print, e-mail) instead of interactive charts")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print capacity.json's verdict as JSON")


def parse_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ReportError(f"--target-date wants YYYY-MM-DD, got {text!r}") from None


# (flag, dest, valid, in words): checked before Spark starts, naming the flag
# (the capacity models would name their own fields, minutes later).
_RANGES = (
    ("--per-broker-rate", "per_broker_rate", lambda v: v > 0, "> 0"),
    ("--sla-rate", "sla_rate", lambda v: v > 0, "> 0"),
    ("--replicas", "replicas", lambda v: v >= 1, ">= 1"),
    ("--domains", "domains", lambda v: v >= 1, ">= 1"),
    ("--utilisation", "utilisation", lambda v: 0 < v <= 1, "within (0, 1]"),
    ("--disk-tb", "disk_tb", lambda v: v > 0, "> 0"),
    ("--quota-headroom", "quota_headroom", lambda v: 0 <= v <= 10, "within [0, 10]"),
    ("--quota-warmup", "quota_warmup", lambda v: 0 <= v <= 3600, "within [0, 3600]"),
)


def topic_shares(args) -> dict[str, float] | None:
    """--topic-share as {topic: share}, or None; ReportError if malformed."""
    text = getattr(args, "topic_share", None)
    if not text:
        return None
    from capacity.quotas import QuotaPlanError, parse_shares

    try:
        return parse_shares(text)
    except QuotaPlanError as exc:
        raise ReportError(f"--topic-share: {exc}") from None


def measured_modes(args) -> dict:
    """mode -> MeasuredRecovery of the --from-drill files ({} without); ReportError if bad."""
    paths = getattr(args, "from_drill", None)
    if not paths:
        return {}
    from capacity.errors import CapacityError
    from capacity.recovery_modes import read_modes

    try:
        return read_modes([paths] if isinstance(paths, str) else paths)
    except CapacityError as exc:
        raise ReportError(str(exc)) from None


def measured_recovery(args):
    """The drills' MeasuredRecovery the plan counts on (the fastest mode's that lost
    nothing), or None without --from-drill; ReportError if bad."""
    from capacity.recovery_modes import headline

    modes = measured_modes(args)
    return headline(modes) if modes else None


def check_arguments(args) -> None:
    """ReportError naming the first bad option value."""
    parse_date(args.target_date)
    measured_recovery(args)
    topic_shares(args)
    if getattr(args, "measured", None) and args.load_test:
        raise ReportError("give --load-test or --measured, not both")
    for flag, dest, ok, words in _RANGES:
        value = getattr(args, dest, None)
        if value is not None and not (math.isfinite(value) and ok(value)):
            raise ReportError(f"{flag} must be {words}, got {value:g}")


def read_measured(out_dir: str) -> dict:
    """`capacity measure --out DIR`'s cells.json."""
    path = Path(out_dir) / "cells.json"
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"--measured {out_dir}: cannot read {path.name}: "
                          f"{exc.strerror} (the --out of `floodgate capacity measure`)") from None
    except ValueError:
        raise ReportError(f"--measured {out_dir}: {path.name} is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise ReportError(f"--measured {out_dir}: {path.name} holds no cells")
    return doc


def options_from_args(args):
    from capacity.forecast import read_history, seed_history_path
    from capacity.usl import read_points
    from spark_reports.capacity_report.plan import Options

    check_arguments(args)
    history = read_history(args.history)
    modes = measured_modes(args)
    drills = measured_recovery(args)
    return Options(
        target_date=parse_date(args.target_date),
        history=history,
        load_test=read_points(args.load_test) if args.load_test else None,
        measured=read_measured(args.measured) if getattr(args, "measured", None) else None,
        measured_flush=getattr(args, "flush", None),
        per_broker_rate=args.per_broker_rate,
        sla_rate=args.sla_rate,
        replicas=args.replicas,
        failure_domains=args.domains,
        target_utilisation=args.utilisation,
        disk_tb=args.disk_tb,
        topic_shares=topic_shares(args),
        quota_headroom=getattr(args, "quota_headroom", 0.2),
        quota_warmup_s=getattr(args, "quota_warmup", 0.0),
        **({"mttr_s": drills.mttr_s, "drills": drills.to_dict(), "modes": modes}
           if drills else {}),
        sources={
            "input": str(args.input),
            "history": str(args.history or seed_history_path()),
            "load_test": args.load_test,
            "measured": getattr(args, "measured", None),
            "drills": args.from_drill if drills else None,
        },
    )


def _rows(df) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def read_table(spark, root: str, table: str, required: bool):
    from spark_reports.schema import conform_spark_frame

    path = f"{root.rstrip('/')}/{table}"
    if "://" not in root and not Path(path).exists():
        if required:
            raise EmptyInput(f"no {table}/ table under {root}")
        return None
    try:
        df = spark.read.parquet(path)
    except Exception as exc:  # Spark's AnalysisException: unreadable or empty directory
        if required:
            raise EmptyInput(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        return None
    return conform_spark_frame(df, table)


def read_percentiles(spark, heatmap_dir: str):
    path = f"{heatmap_dir.rstrip('/')}/percentiles"
    if "://" not in heatmap_dir and not Path(path).exists():
        raise ReportError(
            f"--heatmap {heatmap_dir}: no percentiles/ (run `floodgate report heatmap` first)"
        )
    return spark.read.parquet(path)


def collect_measured(
    spark, root: str, opts, op: str = "send", heatmap_dir: str | None = None
) -> tuple[dict, list[dict]]:
    """Run the Spark steps and collect the small results the plan needs, in three actions.

    Seconds matter for rates (the peak second, each broker's busiest second,
    spike seconds): one pass over the 1 s table evaluates the quarantine rules
    and aggregates per second, per broker and per reason at once (small, cached).
    Latency (totals, merged buckets, the per-minute series) comes from the
    minute rollups when they cover the log, else from minutes rolled up from
    the same 1 s rows. Everything small is then gathered in one action.
    """
    from pyspark.sql import functions as F

    from spark_reports import sources
    from spark_reports.capacity_report import frames as cf
    from spark_reports.gather import gather
    from spark_reports.jobs.compact import minute_rollup
    from spark_reports.schema import LATENCY_1M_TABLE, LATENCY_TABLE

    seconds = cf.with_reason(read_table(spark, root, LATENCY_TABLE, required=True))
    # The one pass over the 1 s rows: the rules and three small grouping sets, kept.
    # A local checkpoint, not cache(): Spark did not match the grouping-sets plan to
    # its cache and ran the pass again for each figure (measured: 65 s each on a day).
    rollups = cf.second_rollups(seconds, op).localCheckpoint()
    reasons = {r["reason"]: r["rows"] for r in cf.rollup_reasons(rollups).collect()}
    bad = F.col("reason").isNotNull()
    cluster_rates = cf.rollup_cluster_rates(rollups)

    days = sources.list_days(spark, sources.table_path(root, LATENCY_TABLE))
    have = sources.list_days(spark, sources.table_path(root, LATENCY_1M_TABLE))
    if days and days <= have:  # the job's one validated minute frame, cached
        cached = cf.with_reason(read_table(spark, root, LATENCY_1M_TABLE, required=True)).cache()
        bad_minutes = cached.filter(bad).groupBy("reason").agg(F.count(F.lit(1)).alias("rows"))
        for r in bad_minutes.collect():  # fills the cache too
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + r["rows"]
        minutes = cached.filter(~bad).drop("reason")
    else:  # no rollups: minutes from the 1 s rows (a second pass over their maps)
        cached = minutes = minute_rollup(seconds.filter(~bad)).cache()

    capacity = opts.per_broker_rate
    if capacity is None and (opts.load_test is not None or opts.measured is not None):
        from spark_reports.capacity_report.plan import per_broker_capacity

        capacity = per_broker_capacity(opts, [])[0]
    frames = {
        "days": cf.daily_peaks(cluster_rates),
        "brokers": cf.rollup_broker_load(rollups, capacity),
        "latency_totals": cf.latency_totals(minutes, op),
        "latency_buckets": cf.latency_buckets(minutes, op),
        "spikes": cf.spikes_from_heatmap(read_percentiles(spark, heatmap_dir), op)
        if heatmap_dir
        else cf.rollup_spike_seconds(rollups),
        "minutes": cf.minute_series(cluster_rates, minutes, op),
    }
    stats = read_table(spark, root, "broker_stats", required=False)
    if stats is not None:
        frames["disk"] = cf.disk_growth(stats)
    got = gather(frames)
    cached.unpersist()
    rollups.unpersist()
    if not got["days"]:
        raise EmptyInput(f"no '{op}' rows in {root}/latency (after quarantine)")
    order = {"days": ("day",), "brokers": ("broker",), "latency_totals": ("broker",),
             "latency_buckets": ("broker", "bucket"), "disk": ("broker",), "minutes": ("minute",)}  # fmt: skip
    for name, keys in order.items():
        got.get(name, []).sort(key=lambda r, keys=keys: tuple(r[k] for k in keys))
    spike_key = "spike_windows" if heatmap_dir else "spike_seconds"
    got["spikes"].sort(key=lambda r: (-r[spike_key], r["broker"]))
    measured = {name: got[name] for name in ("days", "brokers", "latency_totals", "latency_buckets", "spikes")}
    measured["quarantined"] = sum(reasons.values())
    measured["disk"] = got.get("disk", [])
    return measured, got["minutes"]


def versions() -> dict:
    import platform
    from importlib import metadata

    import matplotlib
    import numpy
    import pyspark
    import scipy

    try:  # spark_reports may not import console (docs/architecture.md's dependency rules): ask the install
        version = metadata.version("floodgate")
    except metadata.PackageNotFoundError:  # a bare checkout on a Spark driver
        version = "unknown"
    return {
        "floodgate": version, "python": platform.python_version(), "pyspark": pyspark.__version__,
        "numpy": numpy.__version__, "scipy": scipy.__version__, "matplotlib": matplotlib.__version__,
    }  # fmt: skip


def run(args, spark=None) -> dict:
    """The whole job; returns the plan. `spark` is created from --master when not given."""
    from spark_reports.capacity_report.page import render
    from spark_reports.capacity_report.plan import build_plan
    from spark_reports.output import write_atomic

    opts = options_from_args(args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create --out {out}: {exc.strerror}") from None
    if spark is None:
        from spark_reports.session import get_session

        spark = get_session(
            args.master, "floodgate-report-capacity", progress=not args.json,
            debug=bool(getattr(args, "debug", False)), remote=getattr(args, "remote", None),
        )  # fmt: skip
    measured, minutes = collect_measured(spark, str(args.input), opts, args.op, args.heatmap)
    plan = build_plan(measured, opts)
    plan["inputs"]["versions"] = versions()
    text = json.dumps(plan, indent=2, default=str) + "\n"
    write_atomic(out / "capacity.json", text.encode("utf-8"))
    cell = plan.get("measured_cell")
    points = (cell["concurrency"], cell["throughput"]) if cell else opts.load_test
    html = render(plan, minutes, load_test=points, versions=plan["inputs"]["versions"],
                  static=bool(getattr(args, "static", False)))  # fmt: skip
    write_atomic(out / "report.html", html.encode("utf-8"))
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="capacity", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    from capacity.errors import CapacityError

    try:
        plan = run(args)
    except (ReportError, CapacityError, ValueError, OSError) as exc:
        print(f"capacity: error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}/report.html: {'PASS' if plan['verdict']['pass'] else 'FAIL'}")
    return 0 if plan["verdict"]["pass"] else 1  # as `floodgate report capacity`: gates a pipeline


if __name__ == "__main__":
    sys.exit(main())
