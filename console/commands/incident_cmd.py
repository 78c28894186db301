"""`floodgate incident export`: the post-mortem of a window of a cluster's life, from its
events log and metrics log, as one self-contained HTML page (and Markdown for a ticket).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import UsageError


def register(sub) -> None:
    p = add_subparser(sub, "incident", "the post-mortem of an incident: timeline, latency, "
                      "fuse, failovers, from a cluster's events and metrics logs")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    e = verbs.add_parser("export", help="write the post-mortem page (HTML, and Markdown)",
                         description="Write one self-contained HTML page (and --markdown for a "
                         "ticket) in the structure of a Google SRE post-mortem: what the logs "
                         "know filled in, what only the team knows left blank.")
    where = e.add_mutually_exclusive_group(required=True)
    where.add_argument("--cluster", type=Path, metavar="FILE",
                       help="the cluster's file (its data dir holds the logs)")
    where.add_argument("--data", type=Path, metavar="DIR",
                       help="a cluster's or a finished demo's data dir (`floodgate demo "
                       "--data DIR`)")
    e.add_argument("--from", dest="since", metavar="TIME",
                   help="start: HH:MM[:SS] today, YYYY-MM-DDTHH:MM[:SS] (local time) or Unix "
                   "seconds (default: the first thing recorded)")
    e.add_argument("--to", dest="until", metavar="TIME", help="end, as --from (default: the "
                   "last thing recorded)")
    e.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML page")
    e.add_argument("--markdown", type=Path, metavar="FILE", help="also as Markdown")
    e.add_argument("--json", action="store_true", help="what was written, as JSON")
    e.set_defaults(func=run)


def parse_time(text: str | None, flag: str, now: float | None = None) -> float | None:
    """Local wall time (today's HH:MM[:SS], or a full date and time) or Unix seconds."""
    if text is None:
        return None
    try:
        value = float(text)
        if value > 0:
            return value
    except ValueError:
        pass
    now = time.time() if now is None else now
    for fmt in ("%H:%M", "%H:%M:%S"):
        try:
            t = datetime.strptime(text, fmt).time()
            today = datetime.fromtimestamp(now).date()
            return datetime.combine(today, t).timestamp()
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"{flag} must be HH:MM[:SS], YYYY-MM-DDTHH:MM[:SS] or Unix seconds, "
                         f"got {text!r}") from None


def run(args) -> int:
    if args.verb is None:
        args._parser.print_help()
        return 2
    since, until = parse_time(args.since, "--from"), parse_time(args.until, "--to")
    if since is not None and until is not None and since >= until:
        raise UsageError("--from must be before --to")
    out = args.out.resolve()
    if out.is_dir():
        raise UsageError(f"--out {args.out} is a directory: name the page's file")
    from console.incident.gather import gather, resolve_data
    from console.incident.page import render_html, render_markdown

    data = resolve_data(args.data, args.cluster)
    t0 = time.monotonic()
    inc = gather(data, since, until)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(inc), encoding="utf-8")
    written = [str(out)]
    if args.markdown is not None:
        md = args.markdown.resolve()
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(render_markdown(inc), encoding="utf-8")
        written.append(str(md))
    took = time.monotonic() - t0
    if args.json:
        print_json({"written": written, "from": inc.since, "to": inc.until,
                    "events": len(inc.events), "brokers": [b.name for b in inc.brokers],
                    "seconds": round(took, 2)})
    else:
        print(f"wrote {', '.join(written)}: {len(inc.events)} events, "
              f"{len(inc.brokers)} brokers' sends, in {took:.1f} s")
    return 0
