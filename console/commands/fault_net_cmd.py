"""`floodgate fault net`: partitions, lossy and slow links between the hosts of a
cluster started with `cluster up --netns` (broker_core.cluster.netfault)."""

from __future__ import annotations

from pathlib import Path

from console.commands.common import add_subparser, float_range, int_range, print_json
from console.errors import CommandFailed, UsageError


def register(fsub) -> None:
    net = add_subparser(fsub, "net", "network faults between a namespaced cluster's hosts: "
                        "partition, isolate, loss, rate, delay; heal; show")
    net.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                     help="the cluster.toml of a `cluster up --netns` cluster")
    what = net.add_mutually_exclusive_group(required=True)
    what.add_argument("--partition", metavar="A,B/C,D",
                      help="drop packets between the two sides (`clients`: this host)")
    what.add_argument("--isolate", metavar="NODE", help="NODE / every other host and clients")
    # the ranges netfault takes (it said so after loading the cluster file: exit 1)
    what.add_argument("--loss", type=float_range(0, 100, low_open=True), metavar="PCT",
                      help="drop PCT %% (up to 100) of the packets over --node's link, each way")
    what.add_argument("--rate", type=int_range(8), metavar="KBIT",
                      help="shape --node's link (TBF), 8 kbit/s and up")
    what.add_argument("--delay", type=float_range(0, 10_000, low_open=True), metavar="MS",
                      help="delay the connections made to --node by MS (up to 10000) each way "
                      "(a relay)")
    what.add_argument("--heal", action="store_true", help="remove every network fault")
    what.add_argument("--show", action="store_true", help="list the faults in force")
    net.add_argument("--node", metavar="NODE", help="the host of --loss, --rate, --delay")
    net.add_argument("--one-way", action="store_true",
                     help="--partition: drop only what the first side sends the second")
    net.add_argument("--json", action="store_true")
    net.set_defaults(func=run_net)


def run_net(args) -> int:
    from broker_core.cluster import netfault
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.netns import NetnsError

    spec = load_cluster(args.cluster)
    layout = spec.layout
    if layout is None:
        raise CommandFailed(f"{args.cluster}: cluster {spec.name} is on loopback; network "
                            f"faults need `floodgate cluster up --netns`")
    state = Path(args.cluster).parent
    if args.one_way and not args.partition:
        raise UsageError("--one-way goes with --partition")
    needs_node = args.loss is not None or args.rate is not None or args.delay is not None
    if needs_node and not args.node:
        raise UsageError("--loss, --rate and --delay need --node NODE")
    try:
        if args.show:
            return _print(args, netfault.load(state))
        if args.heal:
            healed = netfault.heal(layout, state)
            if not args.json:
                print(f"healed {len(healed)} network fault(s)" if healed
                      else "no network fault was in force")
                return 0
            return _print(args, healed)
        if args.partition:
            a, sep, b = args.partition.partition("/")
            if not sep:
                raise UsageError(f"--partition {args.partition!r}: give two sides, A,B/C,D")
            fault = netfault.partition(layout, state, _nodes(a), _nodes(b),
                                       one_way=args.one_way)
        elif args.isolate:
            fault = netfault.isolate(layout, state, args.isolate)
        elif args.loss is not None:
            fault = netfault.loss(layout, state, args.node, args.loss)
        elif args.rate is not None:
            fault = netfault.rate(layout, state, args.node, args.rate)
        else:
            fault = netfault.delay(layout, state, args.node, args.delay,
                                   _ports(spec, args.node))
    except NetnsError as exc:
        raise CommandFailed(str(exc)) from None
    return _print(args, [fault])


def _nodes(side: str) -> list[str]:
    nodes = [n.strip() for n in side.split(",") if n.strip()]
    if not nodes:
        raise UsageError("--partition: a side names no node")
    return nodes


def _ports(spec, node: str) -> list[int]:
    """The ports a node serves on: a broker's data, HTTP and HA ports; ZooKeeper's."""
    for b in spec.brokers:
        if b.name == node:
            return [int(a.rsplit(":", 1)[1]) for a in (b.addr, b.http, b.ha) if a]
    if node == "zookeeper" and spec.zk:
        return [int(spec.zk.rsplit(":", 1)[1])]
    raise CommandFailed(f"{node}: --delay needs a broker or zookeeper (it serves no port)")


def _print(args, faults: list[dict]) -> int:
    from broker_core.cluster.netfault import describe

    if args.json:
        print_json(faults)
    elif not faults:
        print("no network fault in force")
    else:
        for f in faults:
            print(describe(f))
    return 0
