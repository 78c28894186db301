"""The clients' view of a replicated cluster: which broker of each group is master.

`ZkRoutes` watches the group records in ZooKeeper (RocketMQ clients ask their
name server; ZooKeeper is ours). Producers send a group's messages to its
master only and re-read the routes when `changes` moves: a failover (which
also moves `version`), or a group whose master has a slave in sync again (its
one-copy answers are over: the producer's fuse lets it back); consumers may read
a group from its slaves while the master is gone.

Watch callbacks run on kazoo's thread and only replace a dict and bump a
counter; clients compare the counters on their own threads, a lock-free int
read, and pick up the new addresses at their next call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from broker_core.errors import BrokerError
from broker_core.ha.group_routes import GroupRoutes
from broker_core.ha.records import GroupRecord, Paths, RecordError


class _WhereLogged(logging.Filter):
    """kazoo reconnects the routes' session by itself (its watches come back with it);
    its connection chatter at WARNING ("Connection dropped: outstanding heartbeat ping not
    received") went through logging's last resort into a command's report, mid-drill. A
    process that set up logging (a broker, the demo, the console) keeps all of it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return bool(logging.getLogger().handlers) or record.levelno >= logging.ERROR


ZK_LOG = logging.getLogger("floodgate.routes.zookeeper")
ZK_LOG.addFilter(_WhereLogged())
# A client's session: it only watches records (nothing of its own lives with it), so a
# long one costs nothing and pings ZooKeeper three times less often than a broker's
# (each client process woke ~3 times a second for it).
ROUTES_SESSION_S = 20.0


class ZkRoutes(GroupRoutes):
    def __init__(self, zk_hosts: str, cluster: str, members: Mapping[str, Sequence[str]],
                 session_s: float = ROUTES_SESSION_S) -> None:
        """`members`: group -> the TCP addresses of its brokers (from the cluster file)."""
        from kazoo.client import KazooClient

        self.paths = Paths(cluster)
        self.members = {g: list(addrs) for g, addrs in members.items()}
        self.zk = KazooClient(hosts=zk_hosts, timeout=session_s, logger=ZK_LOG)
        self.records: dict[str, GroupRecord] = {}
        self.version = 0  # moves when a group's master does
        self.changes = 0  # ... and when a group has a second copy again
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def start(self, timeout: float = 10.0) -> ZkRoutes:
        try:
            self.zk.start(timeout=timeout)
        except Exception as exc:  # kazoo's timeout is a bare Exception subclass
            self.zk.close()
            raise BrokerError(f"ZooKeeper at {self.zk.hosts} unreachable: {exc}") from None
        for group in self.groups:
            self.zk.DataWatch(self.paths.record(group),
                              lambda data, _stat, *_e, g=group: self._on_record(g, data))
        return self

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _on_record(self, group: str, data: bytes | None) -> None:
        try:
            record = GroupRecord.from_json(data)
        except RecordError:
            return
        with self._lock:
            old = self.records.get(group)
            if record is None or record == old:
                return
            self.records = {**self.records, group: record}
            if old is None or (old.master, old.master_addr) != (record.master, record.master_addr):
                self.version += 1
                self.changes += 1
            elif copies_of(record) > 1 >= copies_of(old):
                self.changes += 1
            self._changed.notify_all()

    def copies(self, group: str) -> int:
        """How many of the group's brokers hold what its master acknowledges (0: unknown)."""
        rec = self.records.get(group)
        return copies_of(rec) if rec is not None else 0

    def __enter__(self) -> ZkRoutes:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def copies_of(record: GroupRecord) -> int:
    """The master and the slaves in sync with it."""
    return len(set(record.in_sync) | {record.master}) if record.master else 0


def routes_for(spec, session_s: float = ROUTES_SESSION_S) -> ZkRoutes:
    """Routes of a replicated cluster file (`cluster up --groups`), started: ZooKeeper's
    record of each group, or what its raft members say (ha.raft_routes)."""
    if not spec.replicated:
        raise BrokerError(f"cluster {spec.name} has no ZooKeeper: not a replicated cluster")
    if spec.raft:
        from broker_core.acl.client_keys import client_keys
        from broker_core.ha.raft_routes import RaftRoutes

        # the members are asked as the cluster's admin, over its TLS, as the file says
        return RaftRoutes({g: [b.addr for b in bs] for g, bs in spec.groups.items()},
                          **client_keys(spec.credentials, spec.tls_ca)).start()
    return ZkRoutes(spec.zk, spec.name,
                    {g: [b.addr for b in bs] for g, bs in spec.groups.items()},
                    session_s).start()
