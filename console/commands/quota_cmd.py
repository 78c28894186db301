"""`floodgate quota show|set|clear|apply`: flow-control quotas (限流) on every broker.

Quotas go to every broker of the cluster file, slaves too: a slave promoted
at a failover must enforce what its master did. A quota is checked here
before any broker is asked (bad usage: exit 2); a broker that cannot be
reached is named, the others still get theirs, and the exit status is 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from broker_core.client import admin
from console.commands.common import (
    add_cluster_args,
    add_subparser,
    each_broker,
    finish,
    float_range,
    nonneg_float,
    positive_float,
    print_json,
)
from console.errors import CommandFailed, UsageError
from heatmap.sla import FUSE_CAP_RATIO


def register(sub) -> None:
    parser = add_subparser(sub, "quota", "flow-control quotas per topic and producer group")
    qsub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(qsub, "show", "quotas in force and sends throttled, per broker",
                         aliases=["list"])
    add_cluster_args(show)
    show.set_defaults(func=run_show)
    put = add_subparser(qsub, "set", "set a quota on every broker (kept across restarts)")
    add_cluster_args(put)
    _target(put, required=True)
    put.add_argument("--rate", type=positive_float, required=True, metavar="MSGS_PER_S",
                     help="messages per second each broker admits")
    put.add_argument("--burst", type=float_range(1), metavar="MSGS",
                     help="messages admitted at once, at least 1 (default: 100 ms of the rate)")
    put.add_argument("--warmup", type=nonneg_float, default=0.0, metavar="SECONDS",
                     help="after a cold start, ease in from a third of the rate over this long "
                     "(0, the default: no easing in)")
    put.set_defaults(func=run_set)
    clear = add_subparser(qsub, "clear", "remove quotas (all, or those of one topic or group)")
    add_cluster_args(clear)
    _target(clear, required=False)
    clear.set_defaults(func=run_clear)
    apply = add_subparser(qsub, "apply", "set the capacity plan's per-topic quotas everywhere")
    add_cluster_args(apply)
    apply.add_argument("--plan", type=Path, required=True, metavar="FILE",
                       help="capacity.json from `floodgate report capacity`")
    apply.add_argument("--dry-run", action="store_true", help="print the quotas, set nothing")
    apply.set_defaults(func=run_apply)


def _target(parser, required: bool) -> None:
    which = parser.add_mutually_exclusive_group(required=required)
    which.add_argument("--topic", metavar="T", help="a topic, or a prefix ending in '*'")
    which.add_argument("--group", metavar="G", help="a producer group, or a prefix ending in '*'")


def _each(args, call) -> tuple[dict[str, dict], list[str]]:
    return each_broker(args.cluster, call)


def _show(answers: dict[str, dict], as_json: bool) -> None:
    if as_json:
        print_json(answers)
        return
    for name, doc in answers.items():
        quotas = doc.get("quotas", [])
        throttled = doc.get("throttled_total", 0)
        print(f"{name}: {len(quotas)} quota(s), {throttled:,} send(s) throttled since start")
        for q in quotas:
            warm = f", warm-up {q['warmup_s']:g} s" if q.get("warmup_s") else ""
            print(f"  {q['kind']:5} {q['target']:24} {q['rate']:>12,.0f} msgs/s  "
                  f"burst {q['burst']:,.0f}{warm}")
        for t in doc.get("throttled", []):
            print(f"  throttled: topic {t['topic']} group {t['group'] or '-'}: {t['count']:,}")


def run_show(args) -> int:
    answers, failed = _each(args, lambda http: admin.quota(http, token=args.admin_token))
    _show(answers, args.json)
    return finish(answers, failed)


def _checked(kind: str, target: str, rate: float, burst: float | None, warmup: float) -> dict:
    from broker_core.server.flow_control import Quota, QuotaError

    try:
        return Quota.make(kind, target, rate, burst, warmup).to_dict()
    except QuotaError as exc:
        raise UsageError(str(exc)) from None


def run_set(args) -> int:
    kind, target = ("topic", args.topic) if args.topic else ("group", args.group)
    body = _checked(kind, target, args.rate, args.burst, args.warmup)
    answers, failed = _each(args, lambda http: admin.quota(http, "POST", body, args.admin_token))
    _show(answers, args.json)
    return finish(answers, failed)


def run_clear(args) -> int:
    query = {"kind": "topic", "target": args.topic} if args.topic else \
        {"kind": "group", "target": args.group} if args.group else None
    answers, failed = _each(args, lambda http: admin.quota(http, "DELETE", None,
                                                           args.admin_token, query))
    if args.json:
        print_json(answers)
    else:
        for name, doc in answers.items():
            print(f"{name}: removed {doc.get('removed', 0)}, {len(doc.get('quotas', []))} left")
    code = finish(answers, failed)
    if query is not None and answers and not any(d.get("removed") for d in answers.values()):
        # a typo in --topic must not read as done (`quota show` lists what there is)
        raise CommandFailed(f"no quota on {query['kind']} {query['target']!r} on any broker")
    return code


def plan_quotas(path: Path, brokers: int) -> list[dict]:
    """The plan's per-topic quotas as one broker's (checked); UsageError if unusable."""
    from capacity.quotas import QuotaPlanError, per_broker

    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--plan {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--plan {path}: not JSON ({exc})") from None
    section = plan.get("quotas") if isinstance(plan, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("topics"), list):
        raise UsageError(f"--plan {path}: no quotas in it (a capacity.json from "
                         "`floodgate report capacity` has them)")
    reserve = float(section.get("fuse_reserve", FUSE_CAP_RATIO))
    try:
        quotas = [per_broker(q, brokers, reserve) for q in section["topics"]]
    except QuotaPlanError as exc:
        raise UsageError(f"--plan {path}: {exc}") from None
    return [_checked(q["kind"], q["target"], q["rate"], q["burst"], q["warmup_s"])
            for q in quotas]


def run_apply(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(args.cluster)
    # a replicated group's sends go to its master only: the plan's rate is split over groups
    carriers = len(spec.groups) if spec.replicated else len(spec.brokers)
    quotas = plan_quotas(args.plan, carriers)
    if not args.json or args.dry_run:
        for q in quotas:
            print(f"topic {q['target']}: {q['rate']:,.0f} msgs/s per broker, burst "
                  f"{q['burst']:,.0f} ({carriers} {'groups' if spec.replicated else 'brokers'})")
    if args.dry_run:
        return 0

    def push(http: str) -> dict:
        doc = {}
        for q in quotas:
            doc = admin.quota(http, "POST", q, args.admin_token)
        return doc

    answers, failed = _each(args, push)
    if args.json:
        print_json({"quotas": quotas, "brokers": answers})
    elif answers:
        print(f"set on {len(answers)} broker(s): {', '.join(answers)}")
    return finish(answers, failed)
