"""`floodgate dlq list|show|resend|export`: the dead-letter queues (%DLQ%<group>: messages a
group's consumers failed max_reconsume times) and the retries pending
(%RETRY%<group>), and sending dead letters back to the topic they were first sent
to once their cause is fixed, or exporting them (JSON lines) for whoever fixes it.

Read from the brokers that hold the data (masters and single-copy brokers; a slave
holds its master's copy, read only while no other broker of its group answers). `list`
and `show` print what the brokers that answered hold, then fail naming those that did
not; `resend` and `export` fail first (a group's dead letters left out would be
unsaid). A dead letter stays in its queue after a resend (as in
RocketMQ): resending it again sends it again, so `resend` says how many it sent.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime
from pathlib import Path

from broker_core.client import admin
from broker_core.client.retry import dead_letter_resend
from broker_core.message_id import MessageIdError, decode_id
from broker_core.protocol.system_topics import (
    DLQ_PREFIX,
    PROP_ORIGIN_ID,
    PROP_ORIGIN_TOPIC,
    PROP_RETRY_TIMES,
    RETRY_PREFIX,
)
from console.commands.common import (
    add_cluster_args,
    add_subparser,
    consumer_group,
    copied_answers,
    each_broker,
    finish,
    positive_float,
    positive_int,
    print_json,
)
from console.errors import CommandFailed, UsageError

PAGE = 256


def register(sub) -> None:
    parser = add_subparser(sub, "dlq", "dead-letter queues and pending retries per consumer "
                                       "group; resend dead letters")
    dsub = parser.add_subparsers(metavar="ACTION")
    show_all = add_subparser(dsub, "list", "per group: dead letters and retries pending")
    add_cluster_args(show_all)
    show_all.set_defaults(func=run_list)
    show = add_subparser(dsub, "show", "a group's dead letters, oldest first")
    add_cluster_args(show)
    show.add_argument("--group", required=True, metavar="G", type=consumer_group)
    show.add_argument("--limit", type=positive_int, default=20, metavar="N",
                      help="show at most N (20)")
    show.set_defaults(func=run_show)
    resend = add_subparser(dsub, "resend", "send a group's dead letters back to their topic")
    add_cluster_args(resend)
    resend.add_argument("--group", required=True, metavar="G", type=consumer_group)
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", metavar="MSG_ID", help="one dead letter, by its id")
    which.add_argument("--key", metavar="K", help="the dead letters with this key")
    which.add_argument("--all", action="store_true", help="every dead letter of the group")
    resend.add_argument("--rate", type=positive_float, default=100.0, metavar="MSGS_S",
                        help="at most this many a second (default 100)")
    resend.add_argument("--dry-run", action="store_true", help="say what would go, send none")
    resend.set_defaults(func=run_resend)
    export = add_subparser(dsub, "export", "a group's dead letters as JSON lines, oldest "
                                           "first (body in base64)")
    add_cluster_args(export)
    export.add_argument("--group", required=True, metavar="G", type=consumer_group)
    export.add_argument("--out", metavar="FILE", help="write here (refused if it exists); "
                                                       "default: standard output")
    export.set_defaults(func=run_export)


def _holders(args, answers: dict[str, dict]) -> list[str]:
    """The brokers to read: not a slave whose master answered (it holds that master's
    copy); a slave whose group has no other answer is read (`replicas.slave_copies`)."""
    copies = copied_answers(args.cluster, answers)
    return [n for n in answers if n not in copies]


def run_list(args) -> int:
    answers, failed = each_broker(args.cluster, lambda http: admin.topic(
        http, token=args.admin_token, query={"hottest": "0"}))
    groups: dict[str, dict[str, int]] = {}
    for name in _holders(args, answers):
        for row in answers[name].get("topics", []):
            for prefix, what in ((DLQ_PREFIX, "dead"), (RETRY_PREFIX, "retrying")):
                if row["topic"].startswith(prefix):
                    g = groups.setdefault(row["topic"][len(prefix):], {"dead": 0, "retrying": 0})
                    g[what] += row["messages"]
    if args.json:
        print_json(groups)
    elif not groups:
        print("no group has sent a message back")
    else:
        print(f"{'GROUP':24} {'DEAD LETTERS':>13} {'RETRIED (KEPT)':>15}")
        for name, g in sorted(groups.items()):
            print(f"{name:24} {g['dead']:>13,} {g['retrying']:>15,}")
    return finish(answers, failed)


def _dead_letters(args, limit: int | None = None,
                  partial: bool = False) -> tuple[list[dict], dict, list[str]]:
    """A group's dead letters on every broker that holds data, oldest first; the brokers'
    answers and those that failed. Unless `partial`, a broker that failed fails it (a
    resend or an export must not leave a group's dead letters out unsaid)."""
    from broker_core.cluster.cluster_file import load_cluster

    roles, failed = each_broker(args.cluster, lambda http: admin.topic(
        http, token=args.admin_token, query={"hottest": "0", "topic": DLQ_PREFIX + args.group}))
    if not partial:
        finish(roles, failed)
    holders = set(_holders(args, roles))
    out: list[dict] = []
    for b in load_cluster(args.cluster).brokers:
        if b.name not in holders or not roles[b.name].get("topics"):
            continue
        begin, seen = 0, set()
        while limit is None or len(out) < limit:
            try:
                page = admin.query_by_time(b.addr, DLQ_PREFIX + args.group, begin,
                                           int(time.time() * 1000) + 1, PAGE)
            except admin.AdminError as exc:
                raise CommandFailed(str(exc)) from None
            fresh = [m for m in page["messages"] if m["id"] not in seen]
            out += fresh
            seen.update(m["id"] for m in fresh)
            if not page.get("more") or not fresh:
                break
            begin = page["messages"][-1]["store_ms"]
    out.sort(key=lambda m: m["store_ms"])
    return (out if limit is None else out[:limit]), roles, failed


def _body(m: dict) -> bytes:
    return base64.b64decode(m["body_b64"]) if m.get("body_b64") else m["body"].encode()


def run_show(args) -> int:
    dead, answers, failed = _dead_letters(args, args.limit, partial=True)
    if args.json:
        print_json(dead)
        return finish(answers, failed)
    if not dead:
        print(f"no dead letters for group {args.group}")
        return finish(answers, failed)
    for m in dead:
        p = m.get("properties") or {}
        when = datetime.fromtimestamp(m["store_ms"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        preview = (m.get("body") or "<binary>")[:60]
        print(f"{when}  {m['id']}  from {p.get(PROP_ORIGIN_TOPIC, '?')} "
              f"(first id {p.get(PROP_ORIGIN_ID, '?')}), tried {p.get(PROP_RETRY_TIMES, '?')} "
              f"times  keys {m.get('keys') or '-'}  {preview!r}")
    print(f"(each one's path, from its first send: floodgate trace --cluster {args.cluster} "
          f"--id ID)")
    return finish(answers, failed)  # what the others hold is shown first


def run_resend(args) -> int:
    if args.id:
        try:
            decode_id(args.id)
        except MessageIdError as exc:
            raise UsageError(str(exc)) from None
    dead, _answers, _failed = _dead_letters(args)
    # an id or key well formed and not among them: failed (exit 1), as `trace` says it
    if args.id:
        chosen = [m for m in dead if m["id"] == args.id]
        if not chosen:
            raise CommandFailed(f"no dead letter {args.id} for group {args.group}")
    elif args.key:
        chosen = [m for m in dead if args.key in (m.get("keys") or "").split()]
        if not chosen:
            raise CommandFailed(f"no dead letter with key {args.key!r} for group {args.group}")
    else:
        chosen = dead
    if args.dry_run or not chosen:
        print(f"{len(chosen):,} dead letter(s) would be sent back" if args.dry_run
              else f"no dead letters for group {args.group}")
        return 0
    from broker_core.client.producer import Producer
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.ha.routes import routes_for

    spec = load_cluster(args.cluster)
    routes = routes_for(spec) if spec.replicated else None
    sent = 0
    # traced: `floodgate trace --id` follows each resent message
    with Producer(None if routes else spec.addrs, trace_rate=1.0, routes=routes) as producer:
        t0 = time.monotonic()
        for m in chosen:
            due = t0 + sent / args.rate
            if (wait := due - time.monotonic()) > 0:
                time.sleep(wait)
            topic, props = dead_letter_resend(m.get("properties") or {})
            if not topic:
                continue
            producer.send(topic, _body(m), m.get("tags"), m.get("keys"), props)
            sent += 1
    if routes is not None:
        routes.close()
    print(f"sent {sent:,} dead letter(s) back to their topics (they stay in "
          f"{DLQ_PREFIX}{args.group}: resending again sends them again)")
    return 0


def run_export(args) -> int:
    """One JSON object a line: id, the topic and id it was first sent with, tries, keys,
    tags, properties, store time, body (base64: a body need not be text)."""
    import json
    import sys

    from broker_core.fsutil import atomic_write

    out = Path(args.out) if args.out else None
    if out is not None and out.exists():
        raise UsageError(f"--out {out} exists: give a new file")
    if out is not None and not out.parent.is_dir():
        raise UsageError(f"--out {out}: no directory {out.parent}")
    lines = []
    for m in _dead_letters(args)[0]:
        p = m.get("properties") or {}
        lines.append(json.dumps({
            "id": m["id"], "origin_topic": p.get(PROP_ORIGIN_TOPIC),
            "origin_id": p.get(PROP_ORIGIN_ID), "tries": p.get(PROP_RETRY_TIMES),
            "keys": m.get("keys"), "tags": m.get("tags"), "store_ms": m["store_ms"],
            "properties": p, "body_b64": base64.b64encode(_body(m)).decode("ascii")},
            sort_keys=True))
    text = "".join(line + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write(out, text.encode())
        print(f"{len(lines):,} dead letter(s) of {args.group} written to {out}",
              file=sys.stderr)
    return 0
