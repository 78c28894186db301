"""cluster.toml: the brokers of a cluster, as `cluster up` writes it and every
other command (console, status, bench, prometheus config) reads it::

    name = "floodgate"
    supervisor_pid = 4242          # present while `cluster up` runs

    [[broker]]
    name = "broker-1"
    addr = "127.0.0.1:10911"       # TCP protocol
    http = "127.0.0.1:10912"       # /metrics, /stats, /admin
    data = "/data/broker-1"

A replicated cluster (`cluster up --groups G --replicas R`) also records
ZooKeeper and, per broker, its group and HA address; which broker of a group
is master is not in the file (it changes: ask ZooKeeper, or the brokers). A
cluster on namespaced hosts (`cluster up --netns`) adds a `[netns]` table: its
bridge, the bridge's address and each host's namespace and address::

    zk = "127.0.0.1:10923"
    replication = "sync"

Groups that run Raft (`cluster up --groups G --replicas 3 --consensus raft`) say
`consensus = "raft"` and no ZooKeeper; each broker's `ha` is then its Raft address.

    [[broker]]
    name = "group-1-a"
    group = "group-1"
    ha = "127.0.0.1:10913"
    ...

A member added to a running raft group (`cluster add-replica`) says `joined = true`.
A broker serving RocketMQ 5's gRPC protocol (`cluster up --grpc`) names its port:
`grpc = "127.0.0.1:10940"`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from broker_core.errors import BrokerError
from broker_core.fsutil import atomic_write


@dataclass(frozen=True)
class BrokerEntry:
    name: str
    addr: str
    http: str
    data: str = ""
    group: str = ""  # replicated clusters: the broker's group ...
    ha: str = ""  # ... and its replication (HA) address
    # raft: added to its group after the group started (`cluster add-replica`): it starts
    # with --raft-join, and votes once the configuration naming it reaches it
    joined: bool = False
    grpc: str = ""  # RocketMQ 5's gRPC protocol (`cluster up --grpc`): host:port, or none


@dataclass
class ClusterFile:
    name: str
    brokers: list[BrokerEntry] = field(default_factory=list)
    supervisor_pid: int | None = None
    zk: str = ""  # ZooKeeper of a replicated cluster ("" otherwise)
    replication: str = ""
    netns: dict | None = None  # hosts in network namespaces: cluster.netns.NetLayout
    restart: bool = False  # the supervisor restarts a broker that dies (`up --restart`)
    # brokers enforcing an ACL (`up --acl`): the admin's credentials file (never a secret
    # here), used by commands on this cluster when none is given
    credentials: str = ""
    tls_ca: str = ""  # brokers serving TLS (`up --tls`): the CA that signed them
    # brokers whose admin endpoints take a token (`up --acl`): the file holding it
    admin_token: str = ""
    consensus: str = ""  # "raft": groups that elect their leaders (no ZooKeeper); "" else

    @property
    def layout(self):
        """The namespace layout (cluster.netns.NetLayout), or None on loopback."""
        if not self.netns:
            return None
        from broker_core.cluster.netns import NetLayout

        return NetLayout.from_dict(self.netns)

    @property
    def addrs(self) -> dict[str, str]:
        return {b.name: b.addr for b in self.brokers}

    @property
    def replicated(self) -> bool:
        return bool(self.zk) or self.raft

    @property
    def raft(self) -> bool:
        """Groups that agree by themselves (`up --consensus raft`): no ZooKeeper."""
        return self.consensus == "raft"

    @property
    def groups(self) -> dict[str, list[BrokerEntry]]:
        """group -> its brokers (a cluster without groups: one group per broker)."""
        out: dict[str, list[BrokerEntry]] = {}
        for b in self.brokers:
            out.setdefault(b.group or b.name, []).append(b)
        return out

    def broker(self, name: str) -> BrokerEntry:
        for b in self.brokers:
            if b.name == name:
                return b
        raise BrokerError(f"no broker named {name!r} in cluster {self.name}")

    def to_toml(self) -> dict:
        data: dict = {"name": self.name}
        if self.supervisor_pid:
            data["supervisor_pid"] = self.supervisor_pid
        if self.zk:
            data["zk"] = self.zk
            data["replication"] = self.replication
        if self.consensus:
            data["consensus"] = self.consensus
        if self.netns:
            data["netns"] = self.netns
        if self.restart:
            data["restart"] = True
        if self.credentials:
            data["credentials"] = self.credentials
        if self.tls_ca:
            data["tls_ca"] = self.tls_ca
        if self.admin_token:
            data["admin_token"] = self.admin_token
        data["broker"] = [
            {"name": b.name, "addr": b.addr, "http": b.http, "data": b.data,
             **({"group": b.group, "ha": b.ha} if b.group else {}),
             **({"joined": True} if b.joined else {}),
             **({"grpc": b.grpc} if b.grpc else {})} for b in self.brokers
        ]
        return data

    def save(self, path: Path) -> None:
        atomic_write(path, tomli_w.dumps(self.to_toml()).encode())


def load_cluster(path: str | Path) -> ClusterFile:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BrokerError(
            f"{path}: no such cluster file (made by `floodgate cluster up`)"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BrokerError(f"{path}: not a readable cluster file: {exc}") from None
    brokers = []
    for i, entry in enumerate(raw.get("broker", [])):
        try:
            brokers.append(
                BrokerEntry(
                    str(entry["name"]),
                    str(entry["addr"]),
                    str(entry["http"]),
                    str(entry.get("data", "")),
                    str(entry.get("group", "")),
                    str(entry.get("ha", "")),
                    entry.get("joined") is True,
                    str(entry.get("grpc", "")),
                )
            )
        except (KeyError, TypeError) as exc:
            raise BrokerError(f"{path}: broker #{i + 1} lacks {exc}") from None
    if not brokers:
        raise BrokerError(f"{path}: lists no [[broker]]")
    pid = raw.get("supervisor_pid")
    netns = raw.get("netns")
    return ClusterFile(str(raw.get("name", "floodgate")), brokers, int(pid) if pid else None,
                       str(raw.get("zk", "")), str(raw.get("replication", "")),
                       netns if isinstance(netns, dict) else None, bool(raw.get("restart")),
                       str(raw.get("credentials", "")), str(raw.get("tls_ca", "")),
                       str(raw.get("admin_token", "")), str(raw.get("consensus", "")))
