"""`floodgate cluster transfer-leader`: a raft group's leadership moved on an operator's
word (before a leader's host is serviced, or away from a slow one), and said how long it
took; the old leader refuses sends (NOT_MASTER, naming the new one) from the moment
the transfer begins, so producers follow at once.

    floodgate cluster transfer-leader --cluster FILE --group group-1 [--to group-1-b]
"""

from __future__ import annotations

import json
import time

from console.commands.common import CommandFailed, UsageError, add_cluster_args

WAIT_S = 5.0


def register(csub, add_subparser) -> None:
    p = add_subparser(csub, "transfer-leader", "hand a raft group's leadership to another "
                      "member (it must hold the whole log; given up after an election timeout)")
    add_cluster_args(p)
    p.add_argument("--group", required=True, help="the raft group")
    p.add_argument("--to", metavar="BROKER",
                   help="the member to lead (default: the follower furthest along)")
    p.set_defaults(func=run_transfer)


def run_transfer(args) -> int:
    from broker_core.client import admin
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.roles import broker_role

    spec = load_cluster(args.cluster)
    if not spec.raft:
        raise UsageError(f"{args.cluster}: its groups do not run Raft (cluster up "
                         "--consensus raft); a controller's groups fail over by themselves")
    members = spec.groups.get(args.group)
    if not members or not members[0].group:
        raise UsageError(f"no group {args.group!r} in {args.cluster} "
                         f"(groups: {', '.join(sorted(spec.groups))})")
    roles = {b.name: broker_role(b.addr) for b in members}
    leader = next((b for b in members if roles[b.name].get("role") == "MASTER"), None)
    if leader is None:
        raise CommandFailed(f"{args.group} has no leader now (members: " + ", ".join(
            f"{n} {r.get('role', 'not answering').lower()}" for n, r in roles.items()) + ")")
    doc = roles[leader.name]
    to = args.to or _furthest(doc, leader.name)
    if to == leader.name:
        return _say(args, {"group": args.group, "leader": to, "moved": False,
                           "took_s": 0.0}, f"{to} already leads {args.group}")
    if to not in {b.name for b in members}:
        raise UsageError(f"{to} is not a member of {args.group} "
                         f"({', '.join(b.name for b in members)})")
    started = time.monotonic()
    answer = admin.transfer_leader(leader.http, to, args.admin_token)
    target = next(b for b in members if b.name == to)
    while time.monotonic() - started < WAIT_S:
        now = broker_role(target.addr)
        if now.get("role") == "MASTER":
            took = time.monotonic() - started
            return _say(args, {"group": args.group, "from": leader.name, "leader": to,
                               "term": now.get("term"), "moved": True, "took_s": took},
                        f"{args.group}: {to} leads at term {now.get('term')} (was "
                        f"{leader.name} at term {answer.get('term')}), {took * 1000:.0f} ms")
        time.sleep(0.02)
    raise CommandFailed(f"{args.group}: {to} did not take over within {WAIT_S:g} s (behind, "
                        f"or cut off?); {leader.name} leads again once its election timeout "
                        "passes")


def _furthest(doc: dict, leader: str) -> str:
    replicas = sorted((r for r in doc.get("replicas", []) if not r.get("learner")),
                      key=lambda r: -r.get("match", 0))  # (a learner has no vote to lead)
    return replicas[0]["name"] if replicas else leader


def _say(args, doc: dict, line: str) -> int:
    print(json.dumps(doc) if args.json else line)
    return 0
