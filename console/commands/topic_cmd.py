"""`floodgate topic list|create|update|delete|wipe-write|restore-write`: topics and
queues on every broker of a cluster file, and a broker's writes drained before
maintenance (RocketMQ's `updateTopic`, `deleteTopic`, `wipeWritePerm`,
`addWritePerm`).

Every broker of the cluster file is asked, slaves too (a promoted slave must hold
what its master held). Input is checked before any broker is asked (exit 2); a
broker that cannot be reached is named, the others still get theirs (exit 1).
"""

from __future__ import annotations

from broker_core.client import admin
from broker_core.server.topic_table import MAX_QUEUES
from console.commands.common import (
    add_cluster_args,
    add_subparser,
    broker_groups,
    each_broker,
    finish,
    int_range,
    nonneg_int,
    print_json,
)
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "topic", "topics, queues and write permission on every broker")
    tsub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(tsub, "list", "topics with their queues, permission and messages, "
                                       "and the hottest queues",
                         aliases=["show"])
    add_cluster_args(show)
    show.add_argument("--topic", metavar="T", help="only this topic")
    show.add_argument("--hottest", type=nonneg_int, default=10, metavar="N",
                      help="how many of the hottest queues to show (default 10; 0: none)")
    show.set_defaults(func=run_list)
    create = add_subparser(tsub, "create", "create a topic on every broker")
    add_cluster_args(create)
    _topic_flags(create, required_queues=False)
    create.set_defaults(func=run_create)
    update = add_subparser(tsub, "update", "change a topic's queues (only up) or permission")
    add_cluster_args(update)
    _topic_flags(update, required_queues=False)
    update.set_defaults(func=run_update)
    delete = add_subparser(tsub, "delete", "delete a topic: its queues and every group's "
                                           "offsets in it (messages stay until retention)")
    add_cluster_args(delete)
    delete.add_argument("--topic", required=True, metavar="T")
    delete.add_argument("--yes", action="store_true", help="yes, delete it")
    delete.set_defaults(func=run_delete)
    for name, writable, text in (
            ("wipe-write", False, "refuse every send on a broker (or group) before "
                                  "maintenance: producers go elsewhere, consumers drain it"),
            ("restore-write", True, "take sends again on a broker (or group)")):
        p = add_subparser(tsub, name, text)
        add_cluster_args(p)
        p.add_argument("--broker", required=True, action="append", metavar="NAME",
                       help="a broker or group name of the cluster file (repeatable)")
        p.set_defaults(func=run_write, writable=writable)


def _topic_flags(parser, required_queues: bool) -> None:
    parser.add_argument("--topic", required=True, metavar="T")
    parser.add_argument("--queues", type=int_range(1, MAX_QUEUES), required=required_queues,
                        metavar="N", help=f"queues per broker, 1-{MAX_QUEUES} (default: the "
                        "broker's, 4)")
    parser.add_argument("--perm", metavar="rw|r|w|-",
                        help="rw (default), r (read-only: drain it), w (write-only), - (none)")


def _checked_topic(args) -> dict:
    """The request body, refused here (exit 2) when a broker would refuse it."""
    from broker_core.server.topic_table import TopicError, check_name, check_perm

    try:
        check_name(args.topic)
        if args.perm is not None:
            check_perm(args.perm)
    except TopicError as exc:
        raise UsageError(str(exc)) from None
    body: dict = {"topic": args.topic}
    if args.queues is not None:
        body["queues"] = args.queues
    if args.perm is not None:
        body["perm"] = args.perm
    return body


def _asked(args, topic: str | None = None, hottest: int = 0) -> tuple[dict, list[str]]:
    query = {"hottest": str(hottest), **({"topic": topic} if topic else {})}
    return each_broker(args.cluster, lambda http: admin.topic(
        http, token=args.admin_token, query=query))


def _listing(args, topic: str | None = None) -> dict[str, dict]:
    """Every broker's topics, or a failure naming those that did not answer: a change
    is planned on all of them, never on the ones that happened to answer."""
    answers, failed = _asked(args, topic)
    finish(answers, failed)
    return answers


def _holders(answers: dict[str, dict], topic: str) -> list[str]:
    return [b for b, doc in answers.items()
            if any(r["topic"] == topic for r in doc.get("topics", []))]


def run_list(args) -> int:
    answers, failed = _asked(args, args.topic, args.hottest)
    if args.json:
        print_json(answers)
        return finish(answers, failed)
    print_listing(answers, broker_groups(args.cluster), args.hottest)
    finish(answers, failed)  # after what the others hold: a broker down is when it is read
    if args.topic and not _holders(answers, args.topic):
        raise CommandFailed(f"no broker has topic {args.topic!r}")
    return 0


def stored_messages(rows: list[tuple[str, dict]], group_of: dict[str, str]) -> int:
    """A topic's messages, each counted once: a group's slaves hold copies of its
    master's, so a group counts as its fullest broker (a lagging slave holds fewer)."""
    most: dict[str, int] = {}
    for name, row in rows:
        group = group_of.get(name, name)
        most[group] = max(most.get(group, 0), row["messages"])
    return sum(most.values())


def print_listing(answers: dict[str, dict], group_of: dict[str, str],
                  hottest_shown: int = 10) -> None:
    for name, doc in answers.items():
        state = "writable" if doc.get("writable", True) else "WRITES WIPED"
        print(f"{name}: {state}, {len(doc.get('topics', [])):,} topics, "
              f"{doc.get('queue_count', 0):,} queues, auto-create "
              f"{'on' if doc.get('auto_create') else 'off'}")
    by_topic: dict[str, list[tuple[str, dict]]] = {}
    for name, doc in answers.items():
        for row in doc.get("topics", []):
            by_topic.setdefault(row["topic"], []).append((name, row))
    if by_topic:
        print(f"\n{'TOPIC':32} {'QUEUES':>8} {'PERM':>5} {'MESSAGES':>12}  BROKERS")
    for topic, rows in sorted(by_topic.items()):
        queues = {r["queues"] for _, r in rows}
        perms = {r["perm"] for _, r in rows}
        print(f"{topic:32} {_one_or_many(queues):>8} {_one_or_many(perms):>5} "
              f"{stored_messages(rows, group_of):>12,}  {len(rows)}")
    # each broker answered its own N hottest: the cluster's N hottest are among them
    hottest = sorted(((q, name) for name, doc in answers.items()
                      for q in doc.get("hottest", [])),
                     key=lambda x: -x[0]["rate"])[:hottest_shown]
    if hottest:
        from broker_core.observe.queue_heat import HOT_FACTOR, WINDOW_S

        print(f"\nhottest queues (msgs/s over the last {WINDOW_S:g} s; HOT: over "
              f"{HOT_FACTOR:g}x its topic's median queue on that broker)")
        places = [f"{q['topic']}/{q['queue']}" for q, _ in hottest]
        names = max(len(name) for _, name in hottest)
        width = max(len(p) for p in places)
        for (q, name), place in zip(hottest, places, strict=True):
            mark = "  HOT" if q.get("hot") else ""
            times = f" ({q['times_median']:g}x median)" if q.get("times_median") else ""
            print(f"  {name:{names}}  {place:{width}} {q['rate']:>10,.1f} msgs/s"
                  f"{times}  depth {q['depth']:,}{mark}")


def _one_or_many(values: set) -> str:
    return str(next(iter(values))) if len(values) == 1 else "mixed"


def _put(args, must_exist: bool) -> int:
    body = _checked_topic(args)
    if not must_exist and args.perm is None:
        body.setdefault("perm", "rw")
    answers = _listing(args, args.topic)
    held = _holders(answers, args.topic)
    if must_exist and not held:
        raise CommandFailed(f"no broker has topic {args.topic!r}: `floodgate topic create`")
    if not must_exist and held:
        raise CommandFailed(f"topic {args.topic!r} exists on {', '.join(held)}: "
                            f"`floodgate topic update` changes it")
    if must_exist and "queues" not in body and "perm" not in body:
        raise UsageError("say what to change: --queues and/or --perm")
    have = max((r["queues"] for doc in answers.values() for r in doc["topics"]), default=0)
    if "queues" in body and body["queues"] < have:
        raise UsageError(f"{args.topic} has {have} queues; they can only grow (messages in "
                         f"the queues given up would be stranded)")
    answers, failed = each_broker(args.cluster, lambda http: admin.topic(
        http, "POST", body, args.admin_token))
    if args.json:
        print_json(answers)
    else:
        for name, doc in answers.items():
            for row in doc.get("topics", []):
                print(f"{name}: {row['topic']} {row['queues']} queues, perm {row['perm']}")
    return finish(answers, failed)


def run_create(args) -> int:
    return _put(args, must_exist=False)


def run_update(args) -> int:
    return _put(args, must_exist=True)


def run_delete(args) -> int:
    from broker_core.server.topic_table import TopicError, check_name

    try:
        check_name(args.topic)
    except TopicError as exc:
        raise UsageError(str(exc)) from None
    answers = _listing(args, args.topic)
    held = _holders(answers, args.topic)
    if not held:
        raise CommandFailed(f"no broker has topic {args.topic!r}")
    if not args.yes:
        messages = stored_messages([(name, r) for name, doc in answers.items()
                                    for r in doc["topics"] if r["topic"] == args.topic],
                                   broker_groups(args.cluster))
        raise UsageError(f"deleting {args.topic} drops its queues and every group's offsets "
                         f"on {len(held)} broker(s) ({messages:,} messages no consumer reads "
                         f"again): add --yes")
    done, failed = each_broker(args.cluster, lambda http: admin.topic(
        http, "DELETE", None, args.admin_token, {"topic": args.topic}))
    if args.json:
        print_json(done)
    else:
        for name, doc in done.items():
            if doc.get("deleted"):
                print(f"{name}: deleted {args.topic} ({doc.get('queues', 0)} queues)")
    return finish(done, failed)


def run_write(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster

    cluster = load_cluster(args.cluster)
    known = {b.name for b in cluster.brokers} | {b.group for b in cluster.brokers if b.group}
    unknown = sorted(set(args.broker) - known)
    if unknown:
        raise UsageError(f"not in {args.cluster}: {', '.join(unknown)} (brokers or groups: "
                         f"{', '.join(sorted(known))})")
    answers, failed = each_broker(args.cluster, lambda http: admin.write_permission(
        http, args.writable, args.admin_token), only=set(args.broker))
    if args.json:
        print_json(answers)
    else:
        for name, doc in answers.items():
            print(f"{name}: {'writable' if doc['writable'] else 'writes wiped'}")
    return finish(answers, failed)
