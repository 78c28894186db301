"""Who is master of each group of a replicated cluster, read once from ZooKeeper
(the group records the controller keeps) or from the brokers themselves."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

from broker_core.acl.client_keys import client_keys
from broker_core.cluster.cluster_file import ClusterFile
from broker_core.errors import BrokerError
from broker_core.ha.records import GroupRecord, Paths, Registration, read_events, read_record


@contextmanager
def zk_client(hosts: str, timeout: float = 10.0):
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, timeout=5.0)
    try:
        zk.start(timeout=timeout)
    except Exception as exc:  # kazoo's timeout is a bare Exception subclass
        zk.close()
        raise BrokerError(f"ZooKeeper at {hosts} unreachable: {exc}") from None
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def group_records(spec: ClusterFile, zk=None) -> dict[str, GroupRecord | None]:
    """group -> its record (None: no master chosen yet)."""
    if zk is None:
        with zk_client(spec.zk) as client:
            return group_records(spec, client)
    paths = Paths(spec.name)
    return {group: zk.retry(read_record, zk, paths, group)[0] for group in spec.groups}


def failover_events(spec: ClusterFile, last: int = 50) -> list[dict]:
    with zk_client(spec.zk) as zk:
        return read_events(zk, Paths(spec.name), last)


def broker_role(addr: str, timeout: float = 1.0, credentials=None, tls_context=None) -> dict:
    """A broker's HA_STATE answer: role, epoch, log end ({} when it does not answer).
    `credentials`, `tls_context`: for a broker with an ACL or TLS (None: the process's)."""
    from broker_core.client.connection import Connection
    from broker_core.protocol import Code, Op, decode_json

    conn = Connection(addr, connect_timeout=timeout, credentials=credentials,
                      tls_context=tls_context)
    try:
        code, body = conn.call(Op.HA_STATE, b"{}", timeout)
        return decode_json(body) if code == Code.OK else {}
    except (BrokerError, OSError, TimeoutError):
        return {}
    finally:
        conn.close()


def log_ends(regs: dict[str, Registration], timeout: float = 0.5) -> dict[str, int]:
    """Each broker's log end, asked over HA_STATE (the controller's choice of the
    longest log); a broker that does not answer is left out."""
    out = {}
    for name, reg in regs.items():
        offset = broker_role(reg.addr, timeout).get("offset")
        if offset is not None:
            out[name] = int(offset)
    return out


def asker(spec: ClusterFile) -> dict:
    """`broker_role`'s keywords for a cluster's brokers: its admin's credentials when they
    take users only, its CA when they serve TLS."""
    return client_keys(spec.credentials, spec.tls_ca)


def wait_masters(spec: ClusterFile, timeout: float = 30.0, in_sync: bool = True,
                 check: Callable[[], None] | None = None) -> dict[str, GroupRecord]:
    """Block until every group's record names a master that says it is master (and,
    with `in_sync`, lists every broker of the group as in sync). `check` raises when
    waiting is pointless (e.g. the controller exited)."""
    deadline = time.monotonic() + timeout
    ask = asker(spec)
    if spec.raft:
        return _wait_leaders(spec, timeout, in_sync, lambda addr: broker_role(addr, **ask))
    with zk_client(spec.zk) as zk:
        while True:
            if check is not None:
                check()
            records = group_records(spec, zk)
            ready = {}
            for group, rec in records.items():
                if rec is None:
                    continue
                entry = next((b for b in spec.groups[group] if b.name == rec.master), None)
                if in_sync and len(rec.in_sync) < len(spec.groups[group]):
                    continue
                if entry is not None and broker_role(entry.addr, **ask).get("role") == "MASTER":
                    ready[group] = rec
            if len(ready) == len(records):
                return ready
            if time.monotonic() > deadline:
                missing = sorted(set(records) - set(ready))
                raise BrokerError(f"no master after {timeout:g} s in group(s) "
                                  f"{', '.join(missing)}")
            time.sleep(0.1)


def _wait_leaders(spec: ClusterFile, timeout: float, in_sync: bool,
                  role: Callable[[str], dict]) -> dict[str, GroupRecord]:
    """`wait_masters` for raft groups, asked of their members: one says it leads (and,
    with `in_sync`, that every other member holds everything committed)."""
    deadline = time.monotonic() + timeout
    while True:
        ready = {}
        for group, members in spec.groups.items():
            for b in members:
                doc = role(b.addr)
                if doc.get("role") != "MASTER":
                    continue
                if not in_sync or len(doc.get("in_sync", [])) == len(members) - 1:
                    ready[group] = GroupRecord(b.name, int(doc.get("term", 0)),
                                               (b.name, *doc.get("in_sync", [])), b.addr)
                break
        if len(ready) == len(spec.groups):
            return ready
        if time.monotonic() > deadline:
            missing = sorted(set(spec.groups) - set(ready))
            raise BrokerError(f"no leader{' with every member in sync' if in_sync else ''} "
                              f"after {timeout:g} s in raft group(s) {', '.join(missing)}")
        time.sleep(0.1)
