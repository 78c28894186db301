"""`floodgate tx list|resolve`: transactional messages' halves still pending (neither
committed nor rolled back) and an operator's way to settle a stuck one.

Asked of every broker over its data port (LIST_TRANSACTIONS); a slave answers
NOT_MASTER and is skipped, as its master holds the same halves. A half is named
BROKER:OFFSET — in a replicated cluster GROUP:OFFSET, which survives a failover —
and `resolve` sends END_TRANSACTION to whichever broker of that name is master.
"""

from __future__ import annotations

from broker_core.protocol.transactions import parse_tx_id, tx_id
from console.commands.common import add_cluster_args, add_subparser, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "tx", "transactional messages: halves pending, settle a "
                                      "stuck one")
    tsub = parser.add_subparsers(metavar="ACTION")
    show = add_subparser(tsub, "list", "the pending halves per producer group: age, "
                                       "check-backs, whether a producer of the group is alive",
                         aliases=["show"])
    add_cluster_args(show)
    show.add_argument("--group", metavar="G", help="one producer group")
    show.set_defaults(func=run_list)
    resolve = add_subparser(tsub, "resolve", "commit or roll back a pending half (its "
                                             "producer gone, or stuck UNKNOWN)")
    add_cluster_args(resolve)
    resolve.add_argument("--id", required=True, metavar="BROKER:OFFSET",
                         help="as `floodgate tx list` names it")
    how = resolve.add_mutually_exclusive_group(required=True)
    how.add_argument("--commit", action="store_true", help="deliver it to its topic")
    how.add_argument("--rollback", action="store_true", help="drop it")
    resolve.set_defaults(func=run_resolve)


def _ask(addr: str, op, payload: dict) -> tuple[int, bytes]:
    from broker_core.client.connection import BrokerUnavailable, Connection
    from broker_core.protocol import encode_json

    try:
        conn = Connection(addr, connect_timeout=3.0)
    except (BrokerUnavailable, OSError) as exc:
        raise BrokerUnavailable(str(exc)) from None
    try:
        return conn.call(op, encode_json(payload), 5.0)
    finally:
        conn.close()


def _masters(args):
    """(name halves are known by, broker entry, its LIST answer) for each master and
    single-copy broker; one line per broker not reached."""
    from broker_core.client.connection import BrokerUnavailable
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.protocol import Code, Op, decode_json

    out, failed = [], []
    query = {"group": args.group} if getattr(args, "group", None) else {}
    for b in load_cluster(args.cluster).brokers:
        try:
            code, body = _ask(b.addr, Op.LIST_TRANSACTIONS, query)
        except (BrokerUnavailable, TimeoutError) as exc:
            failed.append(f"{b.name}: {exc}")
            continue
        if code == Code.NOT_MASTER:
            continue
        if code != Code.OK:
            failed.append(f"{b.name}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
            continue
        out.append((b.group or b.name, b, decode_json(body)))
    return out, failed


def run_list(args) -> int:
    masters, failed = _masters(args)
    rows = [{"id": tx_id(name, h["offset"]), "broker": b.name, **h}
            for name, b, doc in masters for h in doc.get("pending", [])]
    figures = {b.name: doc.get("figures", {}) for _n, b, doc in masters}
    if args.json:
        print_json({"pending": rows, "brokers": figures, "unreached": failed})
    elif not rows:
        print("no half message pending" + (f" for group {args.group}" if args.group else ""))
    else:
        print(f"{'ID':24} {'PRODUCER GROUP':16} {'TOPIC':16} {'AGE':>8} {'CHECKS':>6} "
              f"{'NEXT CHECK':>10}  {'PRODUCER':11}  MADE FROM")
        for r in sorted(rows, key=lambda r: -r["age_s"]):
            alive = "alive" if r["producer_alive"] else "none asking"
            # a transform's output names the input offset its commit would move past
            print(f"{r['id']:24} {r['group']:16} {r['topic']:16} {r['age_s']:>7.1f}s "
                  f"{r['checks']:>6} {r['next_check_s']:>9.1f}s  {alive:11}  "
                  f"{r.get('made_from') or '-'}")
    if not args.json:
        for name, f in sorted(figures.items()):
            rolled = ", ".join(f"{k} {v}" for k, v in sorted((f.get("rolled_back") or {}).items()))
            print(f"{name}: {f.get('pending', 0)} pending, {f.get('committed_total', 0)} "
                  f"committed, rolled back: {rolled or 'none'}, "
                  f"{f.get('checks_total', 0)} check-backs")
            if f.get("transform_groups"):
                groups = ", ".join(f"{g} ({n})" for g, n in sorted(f["transform_groups"].items()))
                print(f"  exactly-once commits with offsets: {groups}; "
                      f"{f.get('fenced_total', 0)} fenced")
    if failed:
        raise CommandFailed(f"{len(failed)} broker(s) not reached: {'; '.join(failed)}")
    return 0


def run_resolve(args) -> int:
    from broker_core.client.connection import BrokerUnavailable
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.protocol import Code, Op, decode_json

    try:
        name, offset = parse_tx_id(args.id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    brokers = [b for b in load_cluster(args.cluster).brokers if name in (b.name, b.group)]
    if not brokers:
        raise UsageError(f"no broker or group {name!r} in {args.cluster}")
    decision = "COMMIT" if args.commit else "ROLLBACK"
    reasons = []
    for b in brokers:
        try:
            code, body = _ask(b.addr, Op.END_TRANSACTION,
                              {"offset": offset, "decision": decision, "by": "operator"})
        except (BrokerUnavailable, TimeoutError) as exc:
            reasons.append(f"{b.name}: {exc}")
            continue
        if code == Code.NOT_MASTER:
            reasons.append(f"{b.name}: not master")
            continue
        text = body.decode("utf-8", "replace")
        if code == Code.MESSAGE_NOT_FOUND:  # a well-formed id to nothing: failed, as trace
            raise CommandFailed(text)
        if code != Code.OK:
            raise CommandFailed(f"{b.name}: {Code(code).name}: {text}")
        doc = decode_json(body)
        if doc.get("already"):
            raise CommandFailed(f"{args.id} is {doc.get('state')} already: nothing changed")
        print(f"{args.id}: {doc.get('state')} on {b.name}")
        return 0
    raise CommandFailed(f"{args.id}: no master answered ({'; '.join(reasons)})")
