"""`floodgate acl`: users and rules of the brokers' access control (RocketMQ's ACL 2.0 in
spirit: users; topic and group resources by name or prefix; pub, sub, create, update,
delete, get, list; allow or deny; from a source network). Changes go to every broker
of the cluster (a slave also takes its master's each second) and take effect on
their next request, without a restart. Run with a super user's credentials
(`--credentials FILE`; `cluster up --acl` writes the admin's beside the cluster file).

A new user's SCRAM keys are made here: its secret never reaches a broker.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from console.commands.common import add_subparser, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "acl", "users and permissions on the brokers' data port")
    asub = parser.add_subparsers(metavar="ACTION")
    user = add_subparser(asub, "user", "add, remove or list users")
    usub = user.add_subparsers(metavar="ACTION")
    add = add_subparser(usub, "add", "a user; its secret from --secret-stdin or generated")
    _cluster(add)
    # --user as `allow` and `deny` name it; --name as it was first spelt
    add.add_argument("--user", "--name", dest="name", required=True, metavar="NAME")
    add.add_argument("--super", action="store_true", help="allowed everything (operators, "
                     "the controller, the console)")
    add.add_argument("--secret-stdin", action="store_true",
                     help="read the secret from standard input (never an argument: it "
                     "would show in the process list)")
    add.add_argument("--write-credentials", type=Path, metavar="FILE",
                     help="write the user's credentials file here (mode 0600); with no "
                     "--secret-stdin a random secret is made for it")
    add.add_argument("--rocketmq", action="store_true",
                     help="the user may also sign RocketMQ 5 clients' requests on the "
                     "brokers' gRPC ports (its access secret: `floodgate acl "
                     "rocketmq-secret`)")
    add.set_defaults(func=run_user_add)
    rm = add_subparser(usub, "remove", "a user and its rules")
    _cluster(rm)
    rm.add_argument("--user", "--name", dest="name", required=True, metavar="NAME")
    rm.set_defaults(func=lambda a: _change(a, {"action": "remove_user", "name": a.name}))
    ls = add_subparser(usub, "list", "users' names, one a line (no key leaves a broker)")
    _cluster(ls)
    ls.add_argument("--long", action="store_true",
                    help="each name with its role and the number of its rules")
    ls.set_defaults(func=run_user_list)
    for name, help_text in (("allow", "allow a user actions on a resource"),
                            ("deny", "deny a user actions on a resource (deny wins)"),
                            ("remove", "remove a rule (given as it was added)")):
        p = add_subparser(asub, name, help_text)
        _cluster(p)
        p.add_argument("--user", required=True)
        p.add_argument("--resource", required=True, metavar="RES",
                       help="topic:NAME, topic:PREFIX*, group:NAME, group:PREFIX*, cluster")
        p.add_argument("--actions", required=True, metavar="A,B",
                       help="pub, sub, create, update, delete, get, list")
        p.add_argument("--from", dest="source", metavar="NET",
                       help="only from this network (10.0.0.0/8) or address")
        if name == "remove":
            p.add_argument("--deny", action="store_true", help="the rule removed is a deny")
        p.set_defaults(func=run_rule, verb=name)
    rmq = add_subparser(asub, "rocketmq-secret", "the access secret a RocketMQ client "
                        "signs with for the user of --credentials (made with --rocketmq)")
    rmq.add_argument("--credentials", type=Path, metavar="FILE",
                     help="the user's credentials file (default: FLOODGATE_CREDENTIALS)")
    rmq.set_defaults(func=run_rocketmq_secret)
    rules = add_subparser(asub, "list", "users and rules")
    _cluster(rules)
    rules.set_defaults(func=run_list)


def _cluster(p) -> None:
    p.add_argument("--cluster", type=Path, required=True, metavar="FILE")
    p.add_argument("--json", action="store_true")


def _call_all(args, payload: dict) -> dict:
    """The ACL op on every broker of the cluster; the first answer (they agree)."""
    from broker_core.client.connection import BrokerUnavailable, Connection
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.protocol import Code, Op, decode_json, encode_json

    answers, failed = {}, []
    for b in load_cluster(args.cluster).brokers:
        conn = Connection(b.addr)
        try:
            code, body = conn.call(Op.ACL, encode_json(payload), 5.0)
        except (BrokerUnavailable, TimeoutError) as exc:
            failed.append(f"{b.name}: {exc}")
            continue
        finally:
            conn.close()
        text = body.decode("utf-8", "replace")
        if code == Code.BAD_REQUEST:
            raise UsageError(text)
        if code != Code.OK:
            raise CommandFailed(f"{b.name}: {Code(code).name}: {text}")
        answers[b.name] = decode_json(body)
    if failed:
        done = f"; done on {', '.join(answers)}" if answers else ""
        raise CommandFailed(f"{len(failed)} broker(s) not reached: {'; '.join(failed)}{done}")
    return next(iter(answers.values()))


def _change(args, payload: dict) -> int:
    doc = _call_all(args, payload)
    if args.json:
        print_json(doc)
    elif not doc.get("changed"):
        raise CommandFailed("nothing to change: " + {
            "remove_user": f"no user {payload.get('name')!r}",
            "add_rule": "that rule is there already",
            "remove_rule": "no such rule"}.get(payload["action"], "as it was"))
    else:
        print(f"done on every broker (ACL version {doc['version']})")
    return 0


def run_rocketmq_secret(args) -> int:
    """Print it: a RocketMQ client is configured with it (`Credentials(user, secret)`)."""
    import os

    from broker_core.acl.credentials import ENV, load
    from broker_core.acl.users import rocketmq_secret

    path = args.credentials or os.environ.get(ENV)
    if not path:
        raise UsageError(f"give --credentials FILE (or set {ENV})")
    try:
        creds = load(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"credentials {path}: {exc}") from None
    print(f"access key {creds.user}\naccess secret {rocketmq_secret(creds.secret)}")
    return 0


def run_user_add(args) -> int:
    from broker_core.acl.credentials import Credentials, write
    from broker_core.acl.users import User

    if args.secret_stdin:
        secret = sys.stdin.readline().rstrip("\n")
    elif args.write_credentials is not None:
        secret = secrets.token_urlsafe(24)
    else:
        raise UsageError("give --secret-stdin, or --write-credentials FILE for a random secret")
    out = args.write_credentials
    if out is not None and out.exists():
        raise UsageError(f"--write-credentials {out} exists: give a new file")
    try:
        user = User.make(args.name, secret, args.super, rocketmq=args.rocketmq)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if out is not None:  # written before the user is made: a random secret, never sent,
        try:             # was lost when the file could not be written after
            write(out, Credentials(user.name, secret))
        except OSError as exc:
            raise UsageError(f"--write-credentials {out}: {exc.strerror or exc}") from None
    try:
        _change(args, {"action": "add_user", "name": user.name, "keys": user.to_dict()})
    except UsageError:  # refused as given (every broker would): no user has that secret
        if out is not None:
            out.unlink(missing_ok=True)
        raise
    except CommandFailed as exc:  # a broker not reached: those reached hold this secret
        if out is None:
            raise
        raise CommandFailed(f"{exc}; the credentials stay in {out}") from None
    if out is not None:
        print(f"credentials of {user.name} in {out} (mode 0600)")
    return 0


def run_rule(args) -> int:
    from broker_core.acl.rules import Rule

    allow = args.verb == "allow" or (args.verb == "remove" and not args.deny)
    try:
        rule = Rule.make(args.user, args.resource, args.actions, allow, args.source)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    action = "remove_rule" if args.verb == "remove" else "add_rule"
    return _change(args, {"action": action, "rule": rule.to_dict()})


def run_user_list(args) -> int:
    """Names only, as said (it printed `acl list`: every user and every rule); --json:
    the users' entries, without the rules."""
    doc = _call_all(args, {"action": "list"})
    if args.json:
        print_json({"users": doc["users"]})
        return 0
    for u in doc["users"]:
        if not args.long:
            print(u["name"])
            continue
        rules = sum(1 for r in doc["rules"] if r.get("user") == u["name"])
        print(f"{u['name']}  {'super' if u['super'] else 'user'}  {rules} rule(s)")
    return 0


def run_list(args) -> int:
    from broker_core.acl.rules import Rule

    doc = _call_all(args, {"action": "list"})
    if args.json:
        print_json(doc)
        return 0
    for u in doc["users"]:
        print(f"user {u['name']}{' (super)' if u['super'] else ''}")
    for r in doc["rules"]:
        print(f"  {Rule.from_dict(r)}")
    if not doc["rules"]:
        print("  no rules (only super users are allowed anything)")
    return 0
