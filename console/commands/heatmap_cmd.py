"""`floodgate heatmap show`: draw histograms in the terminal, from a JSONL file or from a
running broker's last minutes (its /stats history: one histogram an op and second)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from console.commands.common import add_subparser, broker_http, int_range, positive_int
from console.errors import CommandFailed, UsageError

HISTORY_MAX_S = 300  # what a broker's /stats keeps (server.http)


def register(sub) -> None:
    parser = add_subparser(sub, "heatmap", "latency heatmaps from recorded histograms")
    hsub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(hsub, "show", "print a terminal heatmap of a JSONL file of histograms, "
                                       "or of a running broker's last minutes")
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", metavar="FILE.jsonl",
                        help='one histogram per line: {"ts": ..., plus '
                             'LatencyHistogram.to_dict() fields}; "-" for stdin')
    source.add_argument("--broker", metavar="HTTP_ADDR|NAME",
                        help="a running broker's last --seconds, by the second: its HTTP "
                             "address, or its name in the --cluster file")
    show.add_argument("--cluster", type=Path, metavar="FILE",
                      help="cluster.toml (from `floodgate cluster up`): brokers by name")
    show.add_argument("--op", default="send", help="with --broker: which op (default send)")
    show.add_argument("--seconds", type=int_range(1, HISTORY_MAX_S), default=HISTORY_MAX_S,
                      help=f"with --broker: how far back, 1-{HISTORY_MAX_S} "
                           f"(default {HISTORY_MAX_S})")
    show.add_argument("--schema", type=int_range(0, 3), default=2, metavar="{0..3}",
                      help="row resolution: 2**schema rows per power of two (default 2)")
    show.add_argument("--width", type=positive_int, default=None,
                      help="columns (default: terminal width)")
    show.set_defaults(func=run_show)


def read_series(lines, source: str):
    """Parse JSONL histograms; a bad line is an error naming its number."""
    from heatmap import LatencyHistogram

    series = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "ts" not in record:
                raise ValueError('expected an object with "ts" and histogram fields')
            series.append((record["ts"], LatencyHistogram.from_dict(record)))
        except ValueError as exc:
            raise CommandFailed(f"{source}:{n}: {exc}") from None
    return series


def broker_series(addr: str, op: str, seconds: int):
    """The broker's per-second histograms of `op` over its last `seconds` (/stats)."""
    from broker_core.client import admin
    from heatmap import LatencyHistogram

    try:
        doc = admin.admin_call(addr, f"/stats?history={seconds}", "GET", None, None, 5.0)
    except admin.AdminError as exc:
        raise CommandFailed(str(exc)) from None
    history = doc.get("history") or {}
    if op not in history:
        raise UsageError(f"--op {op}: {doc.get('broker', addr)} records "
                         f"{', '.join(sorted(history)) or 'no op'}")
    return [(s["ts"], LatencyHistogram.from_dict(s)) for s in history[op]]


def run_show(args) -> int:
    from rich.console import Console

    from heatmap import TerminalHeatmap, build_heatmap

    if args.broker is not None:
        addr = broker_http(args.broker, args.cluster)
        series = broker_series(addr, args.op, args.seconds)
        source = f"{args.broker} {args.op}, last {args.seconds} s"
        if not any(h.count for _, h in series):
            raise CommandFailed(f"{source}: no {args.op} was served")
    elif args.input == "-":
        series, source = read_series(sys.stdin, "<stdin>"), "<stdin>"
    else:
        path = Path(args.input)
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        with path.open(encoding="utf-8") as fh:
            series, source = read_series(fh, str(path)), args.input
    if not series:
        raise CommandFailed(f"{args.input}: no histograms in the file")
    matrix = build_heatmap(series, schema=args.schema)
    total = sum(h.count for _, h in series)
    console = Console(width=args.width) if args.width else Console()
    console.print(TerminalHeatmap(matrix, title=f"{source}: {len(series)} columns, "
                                                f"{total:,} values"))
    return 0
