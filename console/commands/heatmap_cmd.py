"""`floodgate heatmap show`: draw histograms from a JSONL file in the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from console.commands.common import add_subparser
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "heatmap", "latency heatmaps from recorded histograms")
    hsub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(hsub, "show", "print a terminal heatmap of a JSONL file of histograms")
    show.add_argument("--input", required=True, metavar="FILE.jsonl",
                      help='one histogram per line: {"ts": ..., plus LatencyHistogram.to_dict() fields}; "-" for stdin')
    show.add_argument("--schema", type=int, default=2, choices=range(0, 4), metavar="{0..3}",
                      help="row resolution: 2**schema rows per power of two (default 2)")
    show.add_argument("--width", type=int, default=None, help="columns (default: terminal width)")
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


def run_show(args) -> int:
    from rich.console import Console

    from heatmap import TerminalHeatmap, build_heatmap

    if args.input == "-":
        series = read_series(sys.stdin, "<stdin>")
    else:
        path = Path(args.input)
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        with path.open(encoding="utf-8") as fh:
            series = read_series(fh, str(path))
    if not series:
        raise CommandFailed(f"{args.input}: no histograms in the file")
    matrix = build_heatmap(series, schema=args.schema)
    total = sum(h.count for _, h in series)
    console = Console(width=args.width) if args.width else Console()
    console.print(TerminalHeatmap(matrix, title=f"{args.input}: {len(series)} columns, {total:,} values"))
    return 0
