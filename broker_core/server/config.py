"""One broker's settings (the flags of `floodgate broker serve`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker_core.ha.records import SESSION_S
from broker_core.protocol.transactions import CHECK_AFTER_S


@dataclass
class BrokerConfig:
    name: str
    data_dir: Path
    port: int = 10911
    http_port: int = 10912
    grpc_port: int | None = None  # RocketMQ 5's gRPC protocol (broker_core.grpc_front)
    grpc_routes: str | None = None  # a cluster file: routes name every group's master
    grpc_max_deliveries: int = 17  # a popped message handed out this often goes to the DLQ
    grpc_trace_rate: float = 0.0  # the share of RocketMQ clients' sends traced (0..1)
    bind: str = "127.0.0.1"
    cluster: str = "floodgate"
    flush: str = "async"
    segment_bytes: int = 1 << 30
    default_queues: int = 4
    auto_create_topics: bool = True
    metrics_dir: Path | None = None  # default: data_dir / "metrics"
    metrics_roll_s: float = 120.0
    busy_after_ms: float = 200.0
    max_inflight_writes: int = 4096
    admin_token: str | None = None
    # peers besides loopback the admin endpoints answer without a token: the bridge
    # address of a cluster whose brokers live in network namespaces (cluster.netns)
    admin_from: tuple[str, ...] = ()
    frame_timeout_s: float = 10.0  # a partial frame older than this closes the connection
    store_extra: dict = field(default_factory=dict)
    # a replicated group (broker_core.ha): the role comes from the group record in ZooKeeper
    group: str | None = None
    zk: str | None = None
    ha_port: int | None = None
    replication: str = "async"  # or "sync": a send is answered once the in-sync slaves hold it
    zk_session_s: float = SESSION_S  # how soon a dead broker's registration goes
    sync_timeout_s: float = 3.0  # FLUSH_SLAVE_TIMEOUT after this
    # or a group that agrees by itself (broker_core.raft): no ZooKeeper, no controller
    consensus: str = "controller"  # or "raft"
    raft_port: int | None = None
    raft_members: tuple = ()  # raft.members.RaftMember, this broker's among them
    raft_join: bool = False  # joining a running group: no vote until a configuration names it
    # a client's fuse may move leadership away from a leader of this many seconds (0: no;
    # raft.step_aside)
    fuse_moves_leader: float = 0.0
    # a half message unresolved this long is checked back, then again as often
    tx_check_s: float = CHECK_AFTER_S
    # the data port takes authenticated users only, each request checked against the ACL;
    # `acl_admin`: a credentials file whose user becomes the first super user
    acl: bool = False
    acl_admin: Path | None = None
    # TLS on the data, HA and HTTP ports (acl.tls); `tls_ca` signs the other brokers (the
    # HA link) and, with `tls_verify_clients`, the clients' certificates (mutual TLS)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    tls_verify_clients: bool = False

    @property
    def addr(self) -> str:
        return f"{self.bind}:{self.port}"

    @property
    def http_addr(self) -> str:
        return f"{self.bind}:{self.http_port}"
