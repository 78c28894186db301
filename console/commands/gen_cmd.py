"""`floodgate gen double11`: write a synthetic Double-11 metrics log (Parquet)."""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime, timedelta

from console.commands.common import add_subparser, positive_float, positive_int, print_json, seed
from console.errors import UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "gen", "generate synthetic data")
    gsub = parser.add_subparsers(metavar="DATASET")
    d11 = add_subparser(
        gsub,
        "double11",
        "a metrics log of a Double-11 night (latency/ and broker_stats/, Parquet, date= partitions)",
    )
    d11.add_argument("--brokers", type=positive_int, required=True, help="number of brokers")
    d11.add_argument("--hours", type=positive_float, required=True, help="hours of data")
    d11.add_argument("--out", required=True, metavar="DIR", help="directory of the metrics log")
    d11.add_argument(
        "--start",
        default=None,
        help="first second, ISO 8601 UTC; the flash peak is the next 00:00 (default: "
        "2026-11-11T00:00Z in the middle of up to 4 hours, e.g. 23:30..00:30 for --hours 1; "
        "from 2026-11-10T22:00Z for longer nights)",
    )
    d11.add_argument(
        "--seed", type=seed, default=11, help="random seed: same seed, same night (default 11)"
    )
    d11.add_argument("--ops", default="send,pull", help="comma-separated ops (default send,pull)")
    d11.add_argument("--cluster", default="double11", help="cluster name in the rows")
    d11.add_argument("--force", action="store_true", help="replace tables already in --out")
    d11.add_argument("--json", action="store_true", help="print the summary as JSON")
    d11.set_defaults(func=run_double11)


def parse_utc(text: str, flag: str) -> datetime:
    """ISO 8601 time; naive means UTC. Bad input is a usage error naming the flag."""
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag}: not an ISO 8601 time: {text!r}") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


# 1,000 brokers x 2 ops x 24 h is 173 million rows: ten times that is a night to plan
MAX_LATENCY_ROWS = 2_000_000_000
# the three tables on disk per latency row (20 brokers x 1 h: 14.3 MB for 144,000 rows)
EST_BYTES_PER_ROW = 100


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def run_double11(args) -> int:
    from spark_reports.generator import OP_SHAPES, Double11Config
    from spark_reports.generator.model import default_start

    ops = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    bad = [op for op in ops if op not in OP_SHAPES]
    if bad or not ops:
        raise UsageError(
            f"--ops: unknown op {bad[0] if bad else '(none)'}; known: {','.join(OP_SHAPES)}"
        )
    if args.start is None:
        start = default_start(args.hours)
    else:
        start = parse_utc(args.start, "--start").replace(microsecond=0)
    config = Double11Config(
        brokers=args.brokers,
        hours=args.hours,
        start=start,
        seed=args.seed,
        ops=ops,
        cluster=args.cluster,
    )
    rows = config.brokers * len(ops) * config.seconds
    if rows > MAX_LATENCY_ROWS:
        raise UsageError(f"--brokers {args.brokers} x --hours {args.hours:g} x {len(ops)} ops is "
                         f"{rows:,.0f} latency rows, over {MAX_LATENCY_ROWS:,.0f} (ten times "
                         "the largest night the reports are sized for)")
    if not args.json:
        size = rows * EST_BYTES_PER_ROW
        size_text = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"
        print(f"generating {rows:,.0f} latency rows (about {size_text} on disk) into "
              f"{args.out}", file=sys.stderr)
    # SIGTERM as Ctrl-C: the partial tables are removed, not left for the next run to refuse
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = _generate_with_progress(config, args.out, args.force, quiet=args.json)
    finally:
        signal.signal(signal.SIGTERM, previous)
    end = config.start + timedelta(seconds=config.seconds)
    span = {
        "start": config.start.isoformat(),
        "end": end.isoformat(),
        "peak": config.peak_time.isoformat(),
    }
    if args.json:
        print_json({**result.to_dict(), **span})
    else:
        print(
            f"wrote {result.latency_rows:,} latency rows ({result.bucket_entries:,} buckets) and "
            f"{result.broker_stats_rows:,} broker_stats rows to {result.out} "
            f"in {result.files} files, {result.bytes_written / 2**20:.1f} MiB, {result.seconds:.1f} s"
        )
        peak = config.peak_time
        where = "flash peak at" if config.start <= peak < end else "no flash peak inside; next at"
        print(
            f"  {config.start:%Y-%m-%d %H:%M:%S} .. {end:%Y-%m-%d %H:%M:%S} UTC, {where} {peak:%Y-%m-%d %H:%M} UTC"
        )
    return 0


def _generate_with_progress(config, out, force, quiet):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from spark_reports.generator import generate_double11

    columns = (
        TextColumn("generating"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} s of traffic"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    stderr = Console(stderr=True)
    with Progress(*columns, console=stderr, disable=quiet or not stderr.is_terminal) as progress:
        task = progress.add_task("gen", total=config.seconds)
        return generate_double11(
            config,
            out,
            force=force,
            on_progress=lambda done, _total: progress.update(task, completed=done),
        )
