"""Who a local cluster is made of and how each is started: the brokers' entries and
ports, the command lines of a broker and a controller, and the security the cluster
gives them (TLS certificates, the ACL's first super user, the admin endpoints' token).
The launcher (cluster.launcher) starts and supervises what this describes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile
from broker_core.cluster.ports import port_free
from broker_core.errors import BrokerError


def broker_ports(base_port: int, i: int) -> tuple[int, int]:
    """TCP and HTTP port of broker i (0-based): consecutive pairs from the base."""
    return base_port + 2 * i, base_port + 2 * i + 1


def raft_member_flag(entry: BrokerEntry) -> str:
    """NAME=HOST:PORT:RAFT_PORT (raft.members)."""
    return f"{entry.name}={entry.addr}:{entry.ha.rsplit(':', 1)[1]}"


def ha_ports(base_port: int, i: int) -> tuple[int, int, int]:
    """TCP, HTTP and HA port of broker i of a replicated cluster: consecutive triples."""
    return base_port + 3 * i, base_port + 3 * i + 1, base_port + 3 * i + 2


def ports_taken(brokers: int = 0, groups: int = 0, replicas: int = 2) -> int:
    """How many ports from the base a cluster takes: a pair per single-copy broker, or a
    triple per replicated broker and one for the embedded ZooKeeper after them."""
    return 3 * groups * replicas + 1 if groups else 2 * brokers


def single_entries(n: int, base_port: int, data: Path, bind: str) -> list[BrokerEntry]:
    """broker-1 .. broker-N, single copies."""
    entries = []
    for i in range(n):
        tcp, http = broker_ports(base_port, i)
        name = f"broker-{i + 1}"
        entries.append(BrokerEntry(name, f"{bind}:{tcp}", f"{bind}:{http}", str(data / name)))
    return entries


def group_entries(groups: int, replicas: int, base_port: int, data: Path,
                  bind: str) -> list[BrokerEntry]:
    """group-1-a, group-1-b, group-2-a, ...: R brokers in each of G groups."""
    entries = []
    for g in range(groups):
        for r in range(replicas):
            i = g * replicas + r
            tcp, http, ha = ha_ports(base_port, i)
            name = f"group-{g + 1}-{chr(ord('a') + r)}"
            entries.append(BrokerEntry(name, f"{bind}:{tcp}", f"{bind}:{http}",
                                       str(data / name), f"group-{g + 1}", f"{bind}:{ha}"))
    return entries


def with_grpc(entries: list[BrokerEntry], first_port: int) -> list[BrokerEntry]:
    """Each broker also serving RocketMQ 5's gRPC protocol (`cluster up --grpc`), on
    consecutive ports from `first_port` (past the cluster's others)."""
    from dataclasses import replace

    return [replace(e, grpc=f"{e.addr.rsplit(':', 1)[0]}:{first_port + i}")
            for i, e in enumerate(entries)]


def ports_used(file: ClusterFile) -> set[int]:
    """Every port the cluster file names: its brokers' TCP, HTTP, HA and gRPC ports,
    ZooKeeper's."""
    addrs = [a for b in file.brokers for a in (b.addr, b.http, b.ha, b.grpc)]
    return {int(a.rsplit(":", 1)[1]) for a in [*addrs, *file.zk.split(",")] if ":" in a}


def next_member(file: ClusterFile, group: str,
                is_free: Callable[[int, str], bool] = port_free) -> BrokerEntry:
    """A new member of `group` (`cluster add-replica`), joined: the letter after its last
    (group-1-a, b, c -> group-1-d), skipping a name whose data dir is left from a member
    removed before (its old Raft state is not the new member's); TCP, HTTP and Raft ports
    consecutive as ha_ports gives, above every port of the file and free on its host."""
    members = file.groups[group]
    prefix = f"{group}-"
    letters = [b.name[len(prefix):] for b in members if b.name.startswith(prefix)]
    last = max((c for c in letters if len(c) == 1 and "a" <= c <= "z"), default="`")
    root = Path(members[0].data).parent if members[0].data else Path(".")
    taken = {b.name for b in file.brokers}
    name = next((prefix + chr(c) for c in range(ord(last) + 1, ord("z") + 1)
                 if prefix + chr(c) not in taken and not (root / (prefix + chr(c))).exists()),
                None)
    if name is None:
        raise BrokerError(f"{group}: no member name left after {prefix}{last}")
    host = members[0].addr.rsplit(":", 1)[0]
    tcp = next((p for p in range(max(ports_used(file), default=1023) + 1, 65534)
                if all(is_free(q, host) for q in (p, p + 1, p + 2))), None)
    if tcp is None:
        raise BrokerError(f"no three free consecutive ports on {host} above the cluster's")
    return BrokerEntry(name, f"{host}:{tcp}", f"{host}:{tcp + 1}", str(root / name), group,
                       f"{host}:{tcp + 2}", joined=True)


def broker_argv(
    entry: BrokerEntry, cluster: str, flush: str, segment_size: str, extra: list[str],
    zk: str = "", replication: str = "async", raft_group: list[BrokerEntry] | None = None,
) -> list[str]:
    """`raft_group`: the members of the entry's group when the groups run Raft (a member
    added to a running group joins it: `--raft-join`)."""
    host, port = entry.addr.rsplit(":", 1)
    http_port = entry.http.rsplit(":", 1)[1]
    ha = []
    if entry.group and raft_group:
        ha = ["--group", entry.group, "--consensus", "raft",
              "--raft-port", entry.ha.rsplit(":", 1)[1],
              *[f for b in raft_group for f in ("--raft-member", raft_member_flag(b))],
              *(["--raft-join"] if entry.joined else [])]
    elif entry.group:
        ha = ["--group", entry.group, "--zk", zk, "--ha-port", entry.ha.rsplit(":", 1)[1],
              "--replication", replication]
    # the broker's own entry point: a cluster runs without the console installed
    return [sys.executable, "-m", "broker_core", "broker", "--name", entry.name,
            "--data", entry.data, "--port", port, "--http-port", http_port, "--bind", host,
            "--cluster", cluster, "--flush", flush, "--segment-size", segment_size, *ha,
            *(["--grpc-port", entry.grpc.rsplit(":", 1)[1]] if entry.grpc else []), *extra]


def controller_argv(zk: str, cluster: str, name: str, events: Path | None = None
                    ) -> list[str]:
    return [sys.executable, "-m", "broker_core", "controller", "--zk", zk, "--cluster", cluster,
            "--name", name, *(["--events", str(events)] if events is not None else [])]


@dataclass
class Security:
    """What `tls` and `acl` give a cluster: the brokers' extra flags, and the files the
    cluster file names so that clients and operators find them."""
    args: list[str] = field(default_factory=list)
    tls_ca: Path | None = None
    credentials: Path | None = None  # the super user's (`admin`), mode 0600
    admin_token: Path | None = None  # the admin endpoints' bearer token, mode 0600


def secure(data: Path, file: ClusterFile, bind: str, tls: bool, acl: bool) -> Security:
    """`tls`: a local CA and a broker certificate in `data/tls` (acl.tls.make_certs), every
    port speaking TLS; `acl`: brokers take authenticated users only, with a super user
    `admin` whose credentials and the admin endpoints' token the launcher writes in `data`
    when it starts the cluster (mode 0600). Each is named in `file`."""
    out = Security()
    if tls:
        from broker_core.acl.tls import make_certs

        hosts = sorted({"localhost", bind, *(b.addr.rsplit(":", 1)[0] for b in file.brokers)})
        certs = make_certs(data / "tls", hosts)
        out.tls_ca = certs["ca"]
        out.args += ["--tls-cert", str(certs["broker"]), "--tls-key", str(certs["broker_key"]),
                     "--tls-ca", str(certs["ca"])]
        file.tls_ca = str(out.tls_ca)
    if acl:
        out.credentials = data / "admin.credentials.toml"
        out.admin_token = data / "admin.token"
        out.args += ["--acl", "--acl-admin", str(out.credentials), "--admin-token-file",
                     str(out.admin_token)]
        file.credentials = str(out.credentials)
        file.admin_token = str(out.admin_token)
    return out
