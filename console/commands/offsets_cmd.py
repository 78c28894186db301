"""`floodgate offsets show|reset`: a consumer group's offsets per queue, and moving
them (回溯: back to before a bad deploy; `--to-latest`: skip the backlog) with the
group's consumers online.

A reset is computed on every broker first (a dry run: each queue's old and new
offset, the messages skipped or replayed) and printed; then, unless `--dry-run`,
written on the brokers that hold the group's offsets (masters and single-copy
brokers: a slave takes its master's with the next replication of the tables). The
group's consumers drop what they hold and go on from the new offsets within a
heartbeat (2 s). Input is checked before anything is written (exit 2).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from broker_core.client import admin
from console.commands.common import (
    add_cluster_args,
    add_subparser,
    consumer_group,
    copied_answers,
    each_broker,
    finish,
    print_json,
)
from console.errors import UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "offsets", "a consumer group's offsets: show them, move them")
    osub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(osub, "show", "per queue: committed, end, lag, the time at the "
                                       "committed offset",
                         aliases=["list"])
    _common(show)
    show.add_argument("--topic", metavar="T")
    show.set_defaults(func=run_show)
    reset = add_subparser(osub, "reset", "move the group's offsets in a topic (prints the "
                                         "old and new offset per queue first)")
    _common(reset)
    reset.add_argument("--topic", required=True, metavar="T")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-time", metavar="ISO8601",
                    help="the first message stored at or after this time (no zone: UTC)")
    to.add_argument("--to-earliest", action="store_true", help="the oldest message kept")
    to.add_argument("--to-latest", action="store_true", help="the end: skip the backlog")
    to.add_argument("--by", type=int, metavar="N", help="N messages on (negative: back)")
    reset.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    reset.set_defaults(func=run_reset)


def _common(parser) -> None:
    add_cluster_args(parser)
    parser.add_argument("--group", required=True, metavar="G", type=consumer_group, help="the consumer group")


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def run_show(args) -> int:
    query = {"group": args.group, **({"topic": args.topic} if args.topic else {})}
    answers, failed = each_broker(args.cluster, lambda http: admin.offsets(
        http, token=args.admin_token, query=query))
    if args.json:
        print_json(answers)
        return finish(answers, failed)
    copies = copied_answers(args.cluster, answers)
    held = {n: doc for n, doc in answers.items() if n not in copies}
    rows = [(name, q) for name, doc in held.items() for q in doc.get("queues", [])]
    instances = [(name, q) for name, doc in held.items() for q in doc.get("instances", [])]
    if instances:
        _print_instances(args.group, instances)
        if not rows:
            return finish(answers, failed)
    if not rows:
        finish(answers, failed)
        raise UsageError(f"group {args.group!r} has no offsets on any broker"
                         + (f" in topic {args.topic!r}" if args.topic else "")
                         + " (unknown, or its consumers never committed)")
    print(f"{'BROKER':14} {'TOPIC':20} {'QUEUE':>5} {'COMMITTED':>11} {'END':>11} "
          f"{'LAG':>9}  STORED AT THE COMMITTED OFFSET (UTC)")
    for name, q in rows:
        print(f"{name:14} {q['topic']:20} {q['queue']:>5} {q['committed']:>11,} "
              f"{q['max']:>11,} {q['lag']:>9,}  {_when(q['committed_time_ms'])}")
    out = sum(q.get("in_flight", 0) for _, q in rows)
    print(f"total lag {sum(q['lag'] for _, q in rows):,} over {len(rows)} queue(s)"
          + (f"; {out:,} handed to RocketMQ clients, not acknowledged yet" if out else ""))
    for name in sorted(n for n, doc in held.items() if doc.get("role") == "SLAVE"):
        print(f"{name}: a slave's copy (no other broker of its group answered), "
              "up to a second behind its master's")
    return finish(answers, failed)


def _print_instances(group: str, rows: list[tuple[str, dict]]) -> None:
    """A broadcast group: each instance's offsets, as its heartbeats last said."""
    print(f"group {group} consumes in broadcast mode: each instance's own offsets")
    print(f"{'INSTANCE':28} {'BROKER':14} {'TOPIC':20} {'QUEUE':>5} {'COMMITTED':>11} "
          f"{'END':>11} {'LAG':>9}")
    for name, q in sorted(rows, key=lambda r: (r[1]["instance"], r[0], r[1]["queue"])):
        print(f"{q['instance']:28} {name:14} {q['topic']:20} {q['queue']:>5} "
              f"{q['committed']:>11,} {q['max']:>11,} {q['lag']:>9,}")
    lags: dict[str, int] = {}
    for _name, q in rows:
        lags[q["instance"]] = lags.get(q["instance"], 0) + q["lag"]
    print("lag per instance: " + ", ".join(f"{i} {n:,}" for i, n in sorted(lags.items())))


def _target(args) -> tuple[str, int | None]:
    if args.to_earliest:
        return "earliest", None
    if args.to_latest:
        return "latest", None
    if args.by is not None:
        if args.by == 0:
            raise UsageError("--by 0 moves nothing")
        return "by", args.by
    try:
        when = datetime.fromisoformat(args.to_time)
    except ValueError:
        raise UsageError(f"--to-time {args.to_time!r} is not an ISO 8601 time "
                         f"(e.g. 2026-11-11T00:05:00 or 2026-11-11T00:05:00+08:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = int(when.timestamp() * 1000)
    if ms > time.time() * 1000:
        raise UsageError(f"--to-time {args.to_time} is in the future: nothing is stored there")
    return "time", ms


def run_reset(args) -> int:
    to, value = _target(args)
    body = {"group": args.group, "topic": args.topic, "to": to, "value": value,
            "dry_run": True}
    planned, failed = each_broker(args.cluster, lambda http: admin.offsets(
        http, "POST", body, args.admin_token))
    if failed:  # a bad target (e.g. --by past the end) is refused by every broker alike
        if all("outside what it holds" in f or "broadcast mode" in f for f in failed):
            raise UsageError(failed[0].split(": ", 1)[-1])
        finish(planned, failed)
    if not any(q["old"] >= 0 for doc in planned.values() for q in doc.get("queues", [])):
        raise UsageError(f"group {args.group!r} has no offsets in {args.topic} on any broker "
                         f"(unknown, or its consumers never committed): nothing to move")
    _print_plan(planned, args.json and args.dry_run)
    if args.dry_run:
        if not args.json:
            print("dry run: nothing written")
        return 0
    writers = [name for name, doc in planned.items() if doc.get("role") != "SLAVE"]
    body = {**body, "dry_run": False, "epoch": int(time.time() * 1000)}
    done, failed = each_broker(args.cluster, lambda http: admin.offsets(
        http, "POST", body, args.admin_token), only=set(writers))
    if args.json:
        print_json(done)
    else:
        print(f"written on {', '.join(done)}; the group's consumers go on from there within "
              f"a heartbeat")
    return finish(done, failed)


def _print_plan(planned: dict[str, dict], as_json: bool) -> None:
    if as_json:
        print_json(planned)
        return
    print(f"{'BROKER':14} {'QUEUE':>5} {'OLD':>11} {'NEW':>11} {'MESSAGES':>18}")
    for name, doc in planned.items():
        if doc.get("role") == "SLAVE":
            continue  # follows its master
        for q in doc.get("queues", []):
            old = q["old"] if q["old"] >= 0 else q["min"]
            moved = q["new"] - old
            what = "-" if moved == 0 else f"{abs(moved):,} " + ("skipped" if moved > 0
                                                               else "replayed")
            shown = f"{q['old']:,}" if q["old"] >= 0 else "none"
            print(f"{name:14} {q['queue']:>5} {shown:>11} {q['new']:>11,} {what:>18}")
