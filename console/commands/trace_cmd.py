"""`floodgate trace`: where did this message go — a timeline per matching message.

    floodgate trace --cluster FILE (--key K [--topic T] [--since …] [--until …] | --id ID)
                    [--limit N] [--json]

Exit 0 with at least one message (or failed send) found, 1 with none, 2 for bad
usage (a bad id, a bad time, a key with spaces).
"""

from __future__ import annotations

from pathlib import Path

from console.commands.common import add_subparser, positive_float, positive_int, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "trace", "where did this message go: its send, store and "
                                         "deliveries, by key or id")
    parser.add_argument("--cluster", type=Path, metavar="FILE", default=None,
                        help="cluster.toml (default ./cluster.toml)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--key", metavar="K", help="a message key (the KEYS a producer set)")
    what.add_argument("--id", metavar="ID", help="a message id, as a send returned it")
    parser.add_argument("--topic", metavar="T", help="with --key: only this topic")
    parser.add_argument("--since", metavar="WHEN", help="with --key: stored since (10m, 2h, "
                                                        "1d ago, or an ISO time, UTC)")
    parser.add_argument("--until", metavar="WHEN", help="with --key: stored until")
    parser.add_argument("--limit", type=positive_int, default=20,
                        help="messages shown at most, newest first (20)")
    parser.add_argument("--timeout", type=positive_float, default=3.0, help=argparse_hidden())
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


def _check(args) -> None:
    if not args.key and not args.id:
        raise UsageError("give --key K or --id ID")
    if args.id and (args.topic or args.since or args.until):
        raise UsageError("--topic, --since and --until go with --key, not --id")
    if args.key is not None and (not args.key.strip() or len(args.key.split()) != 1):
        raise UsageError(f"--key {args.key!r}: a key is one word (no spaces)")


def run(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.trace_finder import TraceFinder
    from broker_core.message_id import NOT_OURS, MessageIdError, decode_id, rocketmq_id
    from console.trace_format import failed_send_lines, parse_when, timeline_lines

    _check(args)
    if args.id:
        try:
            decode_id(args.id)
        except MessageIdError as exc:
            if rocketmq_id(args.id):
                raise UsageError(f"--id {args.id}: {NOT_OURS} (--key)") from None
            raise UsageError(str(exc)) from None
    begin = parse_when(args.since, "--since") if args.since else 0
    end = parse_when(args.until, "--until") if args.until else None
    if end is not None and end < begin:
        raise UsageError("--until is before --since")
    cluster = load_cluster(args.cluster or Path("cluster.toml"))
    finder = TraceFinder(cluster, timeout=args.timeout)
    try:
        if args.id:
            result = finder.by_id(args.id)
        else:
            result = finder.by_key(args.key, args.topic, begin, end, args.limit)
    finally:
        finder.close()
    if args.json:
        print_json({"timelines": [t.to_dict() for t in result.timelines],
                    "failed_sends": result.failed_sends, "more": result.more,
                    "unreachable": result.unreachable, "not_found": result.not_found})
    else:
        for t in result.timelines:
            print("\n".join(timeline_lines(t)))
            print()
        for r in result.failed_sends:
            print("\n".join(failed_send_lines(r)))
        if result.more:
            print(f"(more messages match: showing the newest {len(result.timelines)}; "
                  "narrow with --since/--until or raise --limit)")
        for name, why in result.unreachable.items():
            print(f"warning: broker {name} did not answer: {why}")
    if result.timelines or result.failed_sends:
        return 0
    what = (f"message {args.id}: {result.not_found}" if args.id else
            f"no message with key {args.key!r}" + (f" in topic {args.topic}" if args.topic
                                                    else "") +
            (" in that time range" if args.since or args.until else ""))
    if set(result.unreachable) >= {b.name for b in cluster.brokers}:
        what = (f"no broker of {args.cluster or 'cluster.toml'} answered: cannot tell "
                f"whether {'message ' + args.id if args.id else f'key {args.key!r}'} exists")
    if args.json:
        return 1
    raise CommandFailed(what)
