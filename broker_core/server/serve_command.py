"""A broker's command line: `python -m broker_core broker` and `floodgate broker serve` both
take these arguments (`add_serve_arguments`) and run `run_serve`, so that a broker
starts without the console and its flags are written once.

Errors: ArgsError for what was typed (exit 2), BrokerError when it cannot start (exit 1).
"""

from __future__ import annotations

import re
from pathlib import Path

from broker_core.errors import BrokerError
from broker_core.flags import (
    ArgsError,  # noqa: F401 (the commands' import of it too)
    add_realtime_arg,
    float_range,
    int_range,
    nonneg_int,
    port,
    positive_float,
    take_realtime,
)
from broker_core.ha.records import SESSION_S
from broker_core.log_format import configure_logging
from broker_core.server.topic_table import MAX_QUEUES

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'64M', '1g', '4096' -> bytes (binary multiples)."""
    m = _SIZE.match(text)
    if not m:
        raise ArgsError(f"bad size {text!r}: expected a number with an optional K, M, G or T")
    return int(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower())


def segment_size(text: str) -> int:
    """--segment-size in bytes, checked before any broker starts: the store maps a segment
    in whole pages (a broker refused it only as it started, as "exited with 2")."""
    size = parse_size(text)
    if not size or size % 4096:
        raise ArgsError(f"--segment-size must be a positive multiple of 4K, got {text!r}")
    return size


def make_data_dir(path) -> None:
    """--data made (parents too), or one line saying why not."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BrokerError(f"--data {path}: cannot make it: {exc.strerror}") from None


def add_serve_arguments(serve) -> None:
    """The flags of a broker (`serve`: an argparse parser)."""
    serve.add_argument("--name", required=True, help="broker name (label in metrics)")
    serve.add_argument("--data", required=True, type=Path, metavar="DIR", help="data directory")
    serve.add_argument("--port", type=port, default=10911, help="TCP port (default 10911)")
    serve.add_argument("--http-port", type=port, default=10912, help="HTTP port (default 10912)")
    serve.add_argument("--grpc-port", type=port, metavar="PORT",
                       help="serve RocketMQ 5's gRPC protocol here too: RocketMQ's own "
                       "clients send to this broker (broker_core.grpc_front)")
    serve.add_argument("--grpc-routes", metavar="CLUSTER_FILE",
                       help="with --grpc-port: a RocketMQ client's route names every group's "
                       "master in this cluster file, not this broker only")
    serve.add_argument("--grpc-max-deliveries", type=int_range(1, 1000), default=17,
                       metavar="N", help="with --grpc-port: a message a RocketMQ consumer "
                       "was handed N times and never acknowledged goes to %%DLQ%%GROUP "
                       "(default 17: the first and RocketMQ's 16 retries)")
    serve.add_argument("--grpc-trace-rate", type=float_range(0.0, 1.0), default=0.0,
                       metavar="R", help="with --grpc-port: the share of RocketMQ clients' "
                       "sends traced, 0..1 (default 0: only those the client traces); "
                       "`floodgate trace` then shows their sends and pops")
    serve.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--flush", choices=("async", "sync"), default="async")
    serve.add_argument("--segment-size", default="1G", metavar="SIZE",
                       help="CommitLog segment size, e.g. 64M (default 1G)")
    serve.add_argument("--retention-hours", type=positive_float, default=72.0,
                       metavar="HOURS", help="CommitLog segments whose newest message is "
                       "older go, with their queue units (RocketMQ's fileReservedTime; 72)")
    serve.add_argument("--cluster", default="floodgate", metavar="NAME")
    serve.add_argument("--metrics-dir", type=Path, metavar="DIR",
                       help="per-second metrics log (default DIR/metrics)")
    serve.add_argument("--metrics-roll", type=positive_float, default=120.0, metavar="SECONDS",
                       help="close a metrics-log file this often (default 120)")
    serve.add_argument("--queues", type=int_range(1, MAX_QUEUES), default=4,
                       help=f"queues of auto-created topics, 1-{MAX_QUEUES} (4)")
    serve.add_argument("--no-auto-create-topics", action="store_true",
                       help="unknown topics are an error instead of created on first send")
    serve.add_argument("--max-mapped-queues", type=nonneg_int, metavar="N",
                       help="queues whose files stay mapped, a mapping each and no "
                       "descriptor (default: 1/4 of vm.max_map_count); past it the least recently used are "
                       "unmapped until used again (0: no limit). More busy queues than "
                       "that cost send throughput (bench/many_queues.py)")
    serve.add_argument("--busy-after-ms", type=positive_float, default=200.0,
                       help="answer SYSTEM_BUSY once the oldest write waits this long")
    token = serve.add_mutually_exclusive_group()
    token.add_argument("--admin-token", help="the admin endpoints (/admin/...) answer this "
                       "bearer token only, from anywhere (it shows in the process list: "
                       "--admin-token-file does not)")
    token.add_argument("--admin-token-file", type=Path, metavar="FILE",
                       help="the same, the token read from FILE (mode 0600; `cluster up "
                       "--acl` makes one)")
    serve.add_argument("--admin-from", action="append", default=[], metavar="ADDR",
                       help="a peer address the admin endpoints answer without a token, "
                       "besides loopback (repeatable; cluster up --netns passes its bridge's)")
    serve.add_argument("--numa", choices=("default", "interleave"), default="default",
                       help="memory policy (interleave: the Double-11 talk's NUMA fix)")
    add_realtime_arg(serve, "a broker")
    ha = serve.add_argument_group(
        "high availability", "a replicated group: the role (master or slave) comes from the "
        "group record the controller keeps in ZooKeeper, never from a flag")
    ha.add_argument("--group", metavar="NAME", help="the broker group this broker belongs to")
    ha.add_argument("--zk", metavar="HOST:PORT[,...]", help="ZooKeeper (needed with --group)")
    ha.add_argument("--ha-port", type=port, metavar="PORT",
                    help="replication port: slaves link to their master's")
    ha.add_argument("--replication", choices=("async", "sync"), default="async",
                    help="sync: answer a send once every in-sync slave holds it (default async)")
    ha.add_argument("--zk-session-timeout", type=float_range(0.2, 60), default=SESSION_S,
                    metavar="SECONDS",
                    help=f"ZooKeeper session: how soon a dead broker's registration goes, "
                    f"0.2-60 ({SESSION_S:g}; a killed master's slave reports it at once)")
    ha.add_argument("--sync-timeout", type=positive_float, default=3.0, metavar="SECONDS",
                    help="sync replication: FLUSH_SLAVE_TIMEOUT after this (3.0)")
    ha.add_argument("--consensus", choices=("controller", "raft"), default="controller",
                    help="raft: the group elects its leader itself (no --zk, no controller)")
    ha.add_argument("--raft-port", type=port, metavar="PORT",
                    help="raft: this broker's port for its group's Raft links")
    ha.add_argument("--raft-member", action="append", default=[],
                    metavar="NAME=HOST:PORT:RAFT_PORT",
                    help="raft: a member of the group (repeat for each, this broker too)")
    ha.add_argument("--raft-join", action="store_true",
                    help="raft: this broker joins a running group (floodgate cluster "
                    "add-replica): it votes once a configuration naming it reaches it")
    ha.add_argument("--fuse-moves-leader", nargs="?", const=60.0, default=0.0,
                    type=float_range(0.5, 3600), metavar="SECONDS",
                    help="raft: a leader a client's fuse finds slow hands the group to a "
                    "follower, once it has led SECONDS (60: a group moves at most once a "
                    "minute)")
    serve.add_argument("--tx-check-s", type=float_range(0, 3600, low_open=True), default=6.0,
                       metavar="SECONDS",
                       help="a half message unresolved this long (up to 3600) is checked back "
                       "with its producer group, then again as often, 15 times at most (6.0)")
    serve.add_argument("--acl", action="store_true",
                       help="the data port takes authenticated users only (SCRAM-SHA-256), "
                       "each request checked against the ACL (`floodgate acl`)")
    serve.add_argument("--acl-admin", type=Path, metavar="FILE",
                       help="with --acl: a credentials file whose user becomes the first "
                       "super user when the broker has none")
    serve.add_argument("--tls-cert", type=Path, metavar="FILE",
                       help="TLS on the data, HA and HTTP ports: this broker's certificate "
                       "(PEM; `floodgate certs make` makes a local one)")
    serve.add_argument("--tls-key", type=Path, metavar="FILE", help="its private key")
    serve.add_argument("--tls-ca", type=Path, metavar="FILE",
                       help="the CA of the other brokers (the HA link) and of client "
                       "certificates")
    serve.add_argument("--tls-verify-clients", action="store_true",
                       help="mutual TLS on the data and HA ports: clients show a "
                       "certificate --tls-ca signed")


def run_serve(args) -> int:
    from broker_core.server.broker import BrokerConfig
    from broker_core.server.runner import ports_in_use, run

    if args.grpc_port is not None and args.grpc_port in (args.port, args.http_port):
        raise ArgsError(f"--grpc-port {args.grpc_port} must be a port other than --port and "
                        "--http-port")
    if args.port == args.http_port:
        raise ArgsError("--port and --http-port must differ")
    if args.admin_token_file is not None:
        from broker_core.acl import admin_token

        try:
            args.admin_token = admin_token.load(args.admin_token_file)
        except ValueError as exc:
            raise ArgsError(str(exc)) from None
    if args.acl_admin is not None:
        from broker_core.acl.credentials import load

        if not args.acl:
            raise ArgsError("--acl-admin goes with --acl")
        try:
            load(args.acl_admin)
        except ValueError as exc:
            raise ArgsError(str(exc)) from None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ArgsError("--tls-cert and --tls-key go together")
    if (args.tls_ca or args.tls_verify_clients) and args.tls_cert is None:
        raise ArgsError("--tls-ca and --tls-verify-clients need --tls-cert and --tls-key")
    if args.tls_cert is not None:
        from broker_core.acl.tls import server_context

        try:
            server_context(args.tls_cert, args.tls_key, args.tls_ca, args.tls_verify_clients)
        except ValueError as exc:
            raise ArgsError(str(exc)) from None
    from broker_core.store.config import SYNCFS_ABOVE

    if args.max_mapped_queues not in (None, 0) and args.max_mapped_queues < SYNCFS_ABOVE:
        raise ArgsError(f"--max-mapped-queues must be 0 (no limit) or at least "
                         f"{SYNCFS_ABOVE}, got {args.max_mapped_queues}")
    raft_members = _check_ha(args)
    segment_bytes = segment_size(args.segment_size)
    config = BrokerConfig(
        name=args.name, data_dir=args.data, port=args.port, http_port=args.http_port,
        grpc_port=args.grpc_port, grpc_routes=args.grpc_routes,
        grpc_max_deliveries=args.grpc_max_deliveries,
        grpc_trace_rate=args.grpc_trace_rate,
        bind=args.bind, cluster=args.cluster, flush=args.flush,
        segment_bytes=segment_bytes, default_queues=args.queues,
        auto_create_topics=not args.no_auto_create_topics, metrics_dir=args.metrics_dir,
        metrics_roll_s=args.metrics_roll, busy_after_ms=args.busy_after_ms,
        admin_token=args.admin_token, admin_from=tuple(args.admin_from), group=args.group, zk=args.zk, ha_port=args.ha_port,
        replication=args.replication, zk_session_s=args.zk_session_timeout,
        sync_timeout_s=args.sync_timeout, tx_check_s=args.tx_check_s,
        consensus=args.consensus, raft_port=args.raft_port, raft_members=raft_members,
        fuse_moves_leader=args.fuse_moves_leader, raft_join=args.raft_join,
        acl=args.acl, acl_admin=args.acl_admin, tls_cert=args.tls_cert,
        tls_key=args.tls_key, tls_ca=args.tls_ca, tls_verify_clients=args.tls_verify_clients,
        store_extra={"retention_hours": args.retention_hours} | (
            {} if args.max_mapped_queues is None else
            {"consumequeue_max_mapped": args.max_mapped_queues}),
    )
    taken = ports_in_use(config)
    if taken:  # before --data is made: a start refused leaves no empty directory behind
        raise BrokerError(f"{', '.join(taken)} in use on {config.bind}: another broker "
                            "there? nothing was made")
    make_data_dir(args.data)
    configure_logging()
    take_realtime(args, "floodgate.broker")
    if args.numa == "interleave":
        from kernel_tuning.numa import set_interleave

        set_interleave()
    run(config)
    return 0


def _check_ha(args) -> tuple:
    """The raft members (empty for a controller's group)."""
    from broker_core.ha.records import parse_zk

    given = [f for f, v in (("--zk", args.zk), ("--ha-port", args.ha_port),
                            ("--raft-port", args.raft_port),
                            ("--raft-member", args.raft_member)) if v]
    if not args.group:
        if given:
            raise ArgsError(f"{' and '.join(given)} need --group")
        return ()
    if args.consensus == "raft":
        return _check_raft(args)
    if not args.zk or not args.ha_port:
        raise ArgsError("--group needs --zk HOST:PORT and --ha-port")
    try:
        parse_zk(args.zk)
    except BrokerError as exc:
        raise ArgsError(f"--zk: {exc}") from None
    if args.ha_port in (args.port, args.http_port):
        raise ArgsError(f"--ha-port {args.ha_port} must be a free port other than "
                         "--port and --http-port")


def _check_raft(args) -> tuple:
    from broker_core.raft.members import check_members, parse_member

    if args.zk or args.ha_port:
        raise ArgsError("--consensus raft takes no --zk or --ha-port: the group agrees by itself")
    if not args.raft_port or not args.raft_member:
        raise ArgsError("--consensus raft needs --raft-port and a --raft-member for each member")
    if args.raft_port in (args.port, args.http_port):
        raise ArgsError(f"--raft-port {args.raft_port} must be a free port other than "
                        "--port and --http-port")
    try:
        members = [parse_member(m) for m in args.raft_member]
        check_members(members, args.name, args.port, args.raft_port)
    except BrokerError as exc:
        raise ArgsError(str(exc)) from None
    return tuple(members)
