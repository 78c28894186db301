"""`floodgate fault inject|clear|show`: drills on a running broker's admin endpoint."""

from __future__ import annotations

from pathlib import Path

from broker_core.client import admin
from console.commands.common import (
    add_subparser,
    broker_http,
    nonneg_float,
    positive_float,
    print_json,
    share,
)
from console.errors import CommandFailed, UsageError
from console.fault_words import describe


def register(sub) -> None:
    parser = add_subparser(sub, "fault", "inject drill faults into a running broker")
    fsub = parser.add_subparsers(metavar="ACTION")
    inject = add_subparser(fsub, "inject", "add latency, PageCache-like stalls, errors or a pause")
    _target(inject)
    # 0, each one's default: that fault is not injected
    inject.add_argument("--stall-ms", type=nonneg_float, default=0.0,
                        help="stall every write for this long, once per period (0: none)")
    inject.add_argument("--every", type=nonneg_float, default=0.0, metavar="SECONDS",
                        help="period of the stalls (needed with --stall-ms)")
    inject.add_argument("--random-stall", action="store_true",
                        help="draw each stall from 200 ms up to --stall-ms (the Double-11 talk's pattern)")
    inject.add_argument("--latency-ms", type=nonneg_float, default=0.0,
                        help="add to every write (0: none)")
    inject.add_argument("--error-rate", type=share, default=0.0,
                        help="share of sends failed, 0..1 (0: none)")
    inject.add_argument("--pause", type=nonneg_float, default=0.0, metavar="SECONDS",
                        help="hold every request for this long (0: none)")
    inject.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                        help="clear by itself after this long (default: at `fault clear`)")
    inject.set_defaults(func=run_inject)
    clear = add_subparser(fsub, "clear", "remove every injected fault")
    _target(clear)
    clear.set_defaults(func=run_clear)
    show = add_subparser(fsub, "show", "print the active fault (of a broker, or with "
                         "--cluster alone every broker's and the network faults in force)",
                         aliases=["list"])
    _target(show, required=False)
    show.set_defaults(func=run_show)
    from console.commands import fault_net_cmd

    fault_net_cmd.register(fsub)


def _target(parser, required: bool = True) -> None:
    parser.add_argument("--broker", required=required, metavar="HTTP_ADDR|NAME",
                        help="the broker's HTTP address, e.g. 127.0.0.1:10912, or its name "
                        "in the --cluster file, e.g. group-2-a")
    parser.add_argument("--cluster", type=Path, metavar="FILE",
                        help="cluster.toml (from `floodgate cluster up`): brokers by name")
    parser.add_argument("--admin-token", help="the broker's --admin-token, if it set one")
    parser.add_argument("--json", action="store_true")


def call(addr: str, method: str, body: dict | None = None, token: str | None = None) -> dict:
    """The broker's admin endpoint; its failure is this command's one-line error."""
    try:
        return admin.fault(addr, method, body, token)
    except admin.AdminError as exc:
        raise CommandFailed(str(exc)) from None


def _print(args, state: dict) -> int:
    if args.json:
        print_json(state)
    elif not state.get("active"):
        print(f"{args.broker}: no fault active")
    else:
        print(f"{args.broker}: {describe(state)}")
    return 0


def run_inject(args) -> int:
    spec = {"stall_ms": args.stall_ms, "stall_every_s": args.every,
            "stall_random": args.random_stall, "latency_ms": args.latency_ms,
            "error_rate": args.error_rate, "pause_s": args.pause, "duration_s": args.duration}
    if not any(v for k, v in spec.items() if k != "duration_s"):
        raise UsageError("nothing to inject: give --stall-ms/--every, --latency-ms, "
                         "--error-rate or --pause")
    if args.stall_ms and not args.every:
        raise UsageError("--stall-ms needs --every SECONDS")
    return _print(args, call(broker_http(args.broker, args.cluster), "POST", spec, args.admin_token))


def run_clear(args) -> int:
    return _print(args, call(broker_http(args.broker, args.cluster), "DELETE", None, args.admin_token))


def run_show(args) -> int:
    if not args.broker and not args.cluster:
        raise UsageError("give --broker HTTP_ADDR|NAME or --cluster FILE")
    if args.broker:
        return _print(args, call(broker_http(args.broker, args.cluster), "GET", None, args.admin_token))
    from broker_core.cluster import netfault
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(args.cluster)
    brokers = {}
    for b in spec.brokers:
        try:
            brokers[b.name] = admin.fault(b.http, "GET", None, args.admin_token)
        except admin.AdminError as exc:
            brokers[b.name] = {"error": str(exc)}
    net = netfault.load(Path(args.cluster).parent) if spec.layout is not None else []
    if args.json:
        print_json({"brokers": brokers, "network": net})
        return 0
    for name, state in brokers.items():
        text = (f"unreachable: {state['error']}" if "error" in state
                else describe(state) if state.get("active") else "no fault active")
        print(f"{name}: {text}")
    if spec.layout is not None:
        print("network: " + ("; ".join(netfault.describe(f) for f in net) if net
                             else "no fault in force"))
    return 0
