"""`floodgate fault inject|clear|show`: drills on a running broker's admin endpoint."""

from __future__ import annotations

from pathlib import Path

from broker_core.client import admin
from console.commands.common import (
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    add_subparser,
    checked,
    number,
    print_json,
)
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "fault", "inject drill faults into a running broker")
    fsub = parser.add_subparsers(metavar="ACTION")
    inject = add_subparser(fsub, "inject", "add latency, PageCache-like stalls, errors or a pause")
    _target(inject)
    number(inject, "--stall-ms", NON_NEGATIVE, default=0.0,
           help="stall every write for this long, once per period")
    number(inject, "--every", NON_NEGATIVE, default=0.0, metavar="SECONDS",
           help="period of the stalls")
    inject.add_argument("--random-stall", action="store_true",
                        help="draw each stall from 200 ms up to --stall-ms (seed 000's pattern)")
    number(inject, "--latency-ms", NON_NEGATIVE, default=0.0, help="add to every write")
    number(inject, "--error-rate", SHARE, default=0.0, help="share of sends failed, 0..1")
    number(inject, "--pause", NON_NEGATIVE, default=0.0, metavar="SECONDS",
           help="hold every request for this long")
    number(inject, "--duration", POSITIVE, default=None, metavar="SECONDS",
           help="clear by itself after this long")
    inject.set_defaults(func=checked(run_inject))
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


def _address(args) -> str:
    """The HTTP address --broker means: as given, or the named broker's in --cluster."""
    if args.cluster is None:
        if ":" not in args.broker:
            raise UsageError(f"--broker {args.broker!r} is not an HTTP address (HOST:PORT); "
                             "to name a broker, give its --cluster FILE too")
        return args.broker
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(args.cluster)
    for b in spec.brokers:
        if args.broker in (b.name, b.http):
            return b.http
    members = [b.name for b in spec.brokers if b.group == args.broker]
    if members:  # which of them is the master now is ZooKeeper's to say, not the file's
        raise UsageError(f"{args.broker} is a group: name one of its brokers "
                         f"({', '.join(members)})")
    raise UsageError(f"no broker {args.broker!r} in {args.cluster}: it has "
                     f"{', '.join(b.name for b in spec.brokers)}")


def call(addr: str, method: str, body: dict | None = None, token: str | None = None) -> dict:
    """The broker's admin endpoint; its failure is this command's one-line error."""
    try:
        return admin.fault(addr, method, body, token)
    except admin.AdminError as exc:
        raise CommandFailed(str(exc)) from None


def duration(seconds: float) -> str:
    """A duration a person reads at a glance: 3 µs, 12.5 ms, 5 s, 2 min 5 s, 1 h 30 min."""
    s = float(seconds)
    if s <= 0:
        return "0 s"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 59.95:
        return f"{s:.3g} s"
    minutes, sec = divmod(round(s), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def describe(state: dict) -> str:
    """The broker's fault state in words, e.g. 'stalls of 800 ms every 5 s, errors 25 %'."""
    parts = []
    if state.get("stall_ms"):
        kind = "random stalls up to" if state.get("stall_random") else "stalls of"
        parts.append(f"{kind} {duration(state['stall_ms'] / 1e3)} every "
                     f"{duration(state.get('stall_every_s') or 0)}")
    if state.get("latency_ms"):
        parts.append(f"latency +{duration(state['latency_ms'] / 1e3)}")
    if state.get("error_rate"):
        parts.append(f"errors {state['error_rate'] * 100:.3g} %")
    if state.get("pause_s"):
        parts.append(f"pause {duration(state['pause_s'])}")
    if state.get("duration_s"):
        left = state.get("remaining_s")
        parts.append(f"clears after {duration(state['duration_s'])}"
                     + (f" ({duration(left)} left)" if left is not None else ""))
    known = {"active", "stall_ms", "stall_every_s", "stall_random", "latency_ms", "error_rate",
             "pause_s", "duration_s", "remaining_s", "since_s"}
    for key, value in state.items():  # fields a newer broker may add
        if key not in known and value not in (0, 0.0, False, None):
            parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    since = state.get("since_s")
    # just injected, the broker's answer came microseconds in: "for 5.59 µs" said nothing
    head = ("fault active" if since is None or since < 1.0
            else f"fault active for {duration(since)}")
    return f"{head}: {', '.join(parts) or 'nothing'}"


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
    return _print(args, call(_address(args), "POST", spec, args.admin_token))


def run_clear(args) -> int:
    return _print(args, call(_address(args), "DELETE", None, args.admin_token))


def run_show(args) -> int:
    if not args.broker and not args.cluster:
        raise UsageError("give --broker HTTP_ADDR|NAME or --cluster FILE")
    if args.broker:
        return _print(args, call(_address(args), "GET", None, args.admin_token))
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
