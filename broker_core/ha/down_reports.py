"""A master seen dead before its ZooKeeper session ends: the slave's report and the
controller's own look.

A broker's registration vanishes a session timeout after its process dies
(`records.SESSION_S`); sessions are not shorter because each one pings ZooKeeper
three times per timeout, idle or not. A killed master is known at once on
another path: the kernel closes its sockets, so its slave's replication link
ends and the slave's reconnect is refused (nothing listens on the HA port).
The slave then writes a report,

    groups/<group>/down     persistent: {master, epoch, by, reason, time}

and the controller, watching it, asks the master's ports itself: both the data
and the HA port refusing a connection is a process gone (a host gone refuses
nothing: that waits for the session, as a partition or a paused process does).
Confirmed, the master counts as not registered and its registration node is
deleted (its restart registers at once); not confirmed, the report is dropped.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass

from broker_core.ha.records import Paths, RecordError

PROBE_TIMEOUT_S = 0.5


def down_path(paths: Paths, group: str) -> str:
    return f"{paths.group(group)}/down"


@dataclass(frozen=True)
class DownReport:
    master: str
    epoch: int
    by: str
    reason: str
    time: float

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> DownReport | None:
        if not data:
            return None
        try:
            doc = json.loads(data)
            return cls(str(doc["master"]), int(doc["epoch"]), str(doc.get("by", "")),
                       str(doc.get("reason", "")), float(doc.get("time", 0.0)))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise RecordError(f"down report unreadable: {exc}") from None


def report_down(zk, paths: Paths, group: str, report: DownReport) -> None:
    """Write (or replace) the group's report."""
    from kazoo.exceptions import NodeExistsError

    path = down_path(paths, group)
    zk.ensure_path(paths.group(group))
    try:
        zk.create(path, report.to_json())
    except NodeExistsError:
        zk.set(path, report.to_json())


def read_down(zk, paths: Paths, group: str) -> DownReport | None:
    from kazoo.exceptions import NoNodeError

    try:
        return DownReport.from_json(zk.get(down_path(paths, group))[0])
    except NoNodeError:
        return None
    except RecordError:
        return None  # a mangled report is no evidence


def clear_down(zk, paths: Paths, group: str) -> None:
    from kazoo.exceptions import NoNodeError

    try:
        zk.delete(down_path(paths, group))
    except NoNodeError:
        pass


def refuses(addr: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when a TCP connection to `addr` (HOST:PORT) is refused: nothing listens
    there. A timeout or an unreachable host is not a refusal."""
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


def process_gone(addrs: list[str]) -> bool:
    """Every one of a broker's ports refuses: its process is gone."""
    return bool(addrs) and all(refuses(a) for a in addrs if a)
