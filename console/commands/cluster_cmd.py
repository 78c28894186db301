"""`floodgate cluster up|down`: a local multi-broker cluster on loopback."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from broker_core.server.serve_command import ArgsError, make_data_dir, segment_size
from console.commands.common import add_subparser, float_range, int_range
from console.errors import CommandFailed, UsageError
from console.logs import configure_logging


def register(sub) -> None:
    parser = add_subparser(sub, "cluster", "start or stop a local cluster of brokers")
    csub = parser.add_subparsers(metavar="ACTION")
    up = add_subparser(csub, "up", "start N brokers (or G replicated groups) on loopback and "
                       "supervise them")
    up.add_argument("--brokers", type=int_range(1, 64), default=None,
                    help="number of single-copy brokers, 1-64 (default 3)")
    up.add_argument("--groups", type=int_range(1, 32), metavar="G",
                    help="replicated: G groups (1-32) of --replicas brokers, a controller and "
                    "ZooKeeper")
    up.add_argument("--replicas", type=int_range(1, 5), default=2, metavar="R",
                    help="brokers per group, 1-5: one master, R-1 slaves (default 2)")
    up.add_argument("--replication", choices=("sync", "async"), default="sync",
                    help="groups: answer a send once the slaves hold it (sync, default) or not")
    up.add_argument("--consensus", choices=("controller", "raft"), default="controller",
                    help="groups: a controller and ZooKeeper choose each master (default), "
                    "or each group of 3+ elects its leader with Raft (no ZooKeeper)")
    up.add_argument("--fuse-moves-leaders", action="store_true",
                    help="raft: a leader the clients' fuse finds slow hands its group to a "
                    "follower (at most once a minute a group)")
    up.add_argument("--zk", metavar="HOST:PORT[,...]",
                    help="groups: this ZooKeeper (default: an embedded one, data in DIR)")
    up.add_argument("--base-port", type=int_range(1024, 65535), default=10911,
                    help="broker i gets TCP base+2i and HTTP base+2i+1; in groups TCP, HTTP "
                    "and HA at base+3i.. and an embedded ZooKeeper after the last (10911; "
                    "1024-65535)")
    up.add_argument("--data", type=Path, default=Path("floodgate-data"), metavar="DIR",
                    help="data root; DIR/cluster.toml lists the brokers (default ./floodgate-data)")
    up.add_argument("--flush", choices=("async", "sync"), default="async")
    up.add_argument("--segment-size", default="64M", metavar="SIZE")
    up.add_argument("--name", default="floodgate", help="cluster name")
    up.add_argument("--restart", action="store_true", help="restart a broker that dies")
    up.add_argument("--netns", action="store_true",
                    help="each broker, ZooKeeper and the controller on a host of its own: a "
                    "network namespace with its own address on a bridge (root only), so "
                    "`fault net` can partition them or slow their links")
    up.add_argument("--acl", action="store_true",
                    help="brokers take authenticated users only (`floodgate acl`); the admin's "
                    "credentials go to admin.credentials.toml (mode 0600) beside the "
                    "cluster file, which names it")
    up.add_argument("--tls", action="store_true",
                    help="every port speaks TLS: a local CA and broker certificate go to "
                    "tls/ in the data dir, and the cluster file names the CA")
    up.add_argument("--grpc", action="store_true",
                    help="each broker also serves RocketMQ 5's gRPC protocol (RocketMQ's own "
                    "clients: docs/topics/rocketmq-clients.md) on a port of its own")
    up.add_argument("--grpc-trace-rate", type=float_range(0.0, 1.0), default=0.0, metavar="R",
                    help="with --grpc: the share of RocketMQ clients' sends the brokers "
                    "trace, 0..1 (default 0): `floodgate trace` shows their sends and pops")
    up.add_argument("--no-auto-create-topics", action="store_true",
                    help="brokers refuse sends to unknown topics (TOPIC_NOT_EXIST): create "
                         "them with `floodgate topic create`, as in production")
    up.set_defaults(func=run_up)
    down = add_subparser(csub, "down", "stop a cluster started by `cluster up`")
    down.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                      help="the cluster.toml that `cluster up` wrote")
    down.set_defaults(func=run_down)
    from console.commands import leader_cmd, member_cmd

    leader_cmd.register(csub, add_subparser)
    member_cmd.register(csub, add_subparser)


def run_up(args) -> int:
    from broker_core.cluster.launcher import Cluster

    groups = _check_up(args)
    try:
        segment_size(args.segment_size)
    except ArgsError as exc:
        raise UsageError(str(exc)) from None
    make_data_dir(args.data)
    configure_logging()
    extra = ["--no-auto-create-topics"] if args.no_auto_create_topics else []
    if args.fuse_moves_leaders:
        extra.append("--fuse-moves-leader")
    if args.netns:
        from broker_core.cluster.netns import unavailable

        why = unavailable()
        if why:
            raise CommandFailed(f"--netns: {why}")
    if groups:
        cluster = Cluster(0, args.base_port, args.data, args.flush, args.segment_size,
                          args.name, extra_args=extra, groups=groups, replicas=args.replicas,
                          replication=args.replication, zk=args.zk, netns=args.netns,
                          acl=args.acl, tls=args.tls, consensus=args.consensus,
                          grpc=args.grpc, grpc_trace_rate=args.grpc_trace_rate)
    else:
        cluster = Cluster(_brokers(args), args.base_port, args.data, args.flush,
                          args.segment_size, args.name, extra_args=extra, netns=args.netns,
                          acl=args.acl, tls=args.tls, grpc=args.grpc,
                          grpc_trace_rate=args.grpc_trace_rate)
    stop = threading.Event()

    def stopping(*_) -> None:
        stop.set()
        cluster.stop_supervising()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    cluster.file.restart = args.restart
    cluster.up()
    spec = cluster.file
    what = (f"{groups} groups x {args.replicas} (Raft: each elects its leader)" if spec.raft
            else f"{groups} groups x {args.replicas} ({args.replication} replication, "
            f"ZooKeeper {spec.zk})" if groups else f"{len(spec.brokers)} brokers")
    print(f"cluster {args.name}: {what} up; cluster file {cluster.path}", flush=True)
    scheme = "https" if cluster.tls_ca is not None else "http"  # its HTTP port speaks TLS too
    for b in spec.brokers:
        group = f"  {b.group} {'raft' if spec.raft else 'ha'} {b.ha}" if b.group else ""
        grpc = f"  grpc {b.grpc}" if b.grpc else ""
        print(f"  {b.name}  tcp {b.addr}  http {scheme}://{b.http}/stats{grpc}{group}",
              flush=True)
    if cluster.layout is not None:
        print(f"  hosts: network namespaces on bridge {cluster.layout.bridge} "
              f"(this host is {cluster.layout.gateway}): "
              + ", ".join(f"{h.name} {h.addr}" for h in cluster.layout.hosts.values()
                          if h.name not in spec.addrs), flush=True)
    print(f"  metrics log: {cluster.metrics_dir} (every broker's, rolled every 2 min: "
          f"floodgate report heatmap --input {cluster.metrics_dir} --out DIR)", flush=True)
    if cluster.tls_ca is not None:
        print(f"  TLS on: CA {cluster.tls_ca} (clients: FLOODGATE_TLS_CA or --tls-ca)",
              flush=True)
    if cluster.credentials is not None:
        print(f"  ACL on: admin credentials in {cluster.credentials} (floodgate --credentials "
              f"FILE acl ...); the admin endpoints take the token in {cluster.admin_token} "
              "(commands with --cluster send it)", flush=True)
    print("Ctrl-C (or `floodgate cluster down --cluster FILE`) stops them all.", flush=True)
    try:
        cluster.supervise(stop.is_set, restart=args.restart)
    finally:
        cluster.down()
        print("cluster stopped", file=sys.stderr)
    return 0


def _check_up(args) -> int | None:
    """The number of groups (None: single-copy brokers); UsageError on bad values."""
    if args.groups is not None and args.brokers is not None:
        raise UsageError("--brokers and --groups exclude each other")
    if args.netns and args.zk:
        raise UsageError("--netns runs its own ZooKeeper on a host of its own: drop --zk")
    if args.fuse_moves_leaders and args.consensus != "raft":
        raise UsageError("--fuse-moves-leaders is for --consensus raft (a controller's "
                         "groups move their master only when it fails)")
    if args.groups is None:
        if args.zk:
            raise UsageError("--zk needs --groups")
        if args.consensus == "raft":
            raise UsageError("--consensus raft needs --groups G --replicas 3 (or more)")
        n = _brokers(args)
        if args.base_port > 65535 - 2 * n:
            raise UsageError(f"--base-port {args.base_port} leaves no room for {n} brokers")
        return None
    if args.consensus == "raft" and (args.zk or args.replicas < 3):
        raise UsageError("--consensus raft needs --replicas 3 or more (with two, losing one "
                         "stops the group) and no --zk (the groups agree by themselves)")
    n = args.groups * args.replicas
    if args.base_port > 65535 - 3 * n - 1:
        raise UsageError(f"--base-port {args.base_port} leaves no room for {n} brokers")
    if args.zk:
        from broker_core.errors import BrokerError
        from broker_core.ha.records import parse_zk

        try:
            parse_zk(args.zk)
        except BrokerError as exc:
            raise UsageError(f"--zk: {exc}") from None
    return args.groups


def _brokers(args) -> int:
    """--brokers, 3 when not given (0 is refused by its type: it started 3 once)."""
    return 3 if args.brokers is None else args.brokers


def run_down(args) -> int:
    from broker_core.cluster.cluster_file import load_cluster

    spec = load_cluster(args.cluster)
    if not spec.supervisor_pid:
        raise CommandFailed(f"{args.cluster}: no running supervisor recorded (already down?)")
    try:
        os.kill(spec.supervisor_pid, signal.SIGTERM)
    except ProcessLookupError:
        raise CommandFailed(f"supervisor pid {spec.supervisor_pid} is not running") from None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(spec.supervisor_pid, 0)
        except ProcessLookupError:
            print(f"cluster {spec.name} stopped")
            return 0
        time.sleep(0.2)
    raise CommandFailed(f"supervisor pid {spec.supervisor_pid} still running after 30 s")
