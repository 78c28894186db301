"""What a replicated cluster keeps in ZooKeeper, under /floodgate/<cluster>:

    groups/<group>/record            persistent: the group record (JSON, below)
    groups/<group>/brokers/<name>    ephemeral: a broker's registration (gone with its session)
    groups/<group>/down              persistent: a slave's report that its master died
                                     (ha.down_reports)
    controller/election              kazoo Election: one controller leads
    events/e-<seq>                   persistent, sequential: failovers (the last 200)

The group record is the state machine of the Double-11 talk's design: which broker is
master, the epoch (+1 at every change of master) and the in-sync set (the
master and the slaves that hold every acknowledged message). The controller
creates it and changes the master; the master itself shrinks and grows the
in-sync set. Every write is a compare-and-set on the node's version, so two
writers that read the same record cannot both succeed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from broker_core.errors import BrokerError

ROOT = "/floodgate"
MAX_EVENTS = 200
# A broker's (and a controller's) ZooKeeper session: its registration goes this long
# after it stops answering. Each session pings three times per timeout, idle or not
# (kazoo): at 1 s that was 2 ms of CPU a second in every broker and a third of an idle
# cluster's ZooKeeper. Kafka's brokers use 9 s (KRaft) or 18 s (ZooKeeper). A killed
# master does not wait for it: its slave reports it (ha.down_reports).
SESSION_S = 6.0


class RecordError(BrokerError):
    pass


def parse_zk(hosts: str) -> str:
    """Check a `--zk HOST:PORT[,HOST:PORT...]` value; returns it stripped."""
    hosts = hosts.strip()
    for part in hosts.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RecordError(f"bad ZooKeeper address {part!r}: expected HOST:PORT[,HOST:PORT...]")
    return hosts


@dataclass(frozen=True)
class Paths:
    cluster: str

    @property
    def root(self) -> str:
        return f"{ROOT}/{self.cluster}"

    @property
    def groups(self) -> str:
        return f"{self.root}/groups"

    def group(self, group: str) -> str:
        return f"{self.groups}/{group}"

    def record(self, group: str) -> str:
        return f"{self.group(group)}/record"

    def brokers(self, group: str) -> str:
        return f"{self.group(group)}/brokers"

    def broker(self, group: str, name: str) -> str:
        return f"{self.brokers(group)}/{name}"

    @property
    def election(self) -> str:
        return f"{self.root}/controller/election"

    @property
    def events(self) -> str:
        return f"{self.root}/events"


def _load(data: bytes | None, what: str) -> dict[str, Any] | None:
    if not data:
        return None
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise RecordError(f"{what} is not JSON") from None
    if not isinstance(doc, dict):
        raise RecordError(f"{what} is not a JSON object")
    return doc


@dataclass(frozen=True)
class GroupRecord:
    master: str
    epoch: int
    in_sync: tuple[str, ...]
    master_addr: str = ""  # its TCP address (clients), and ...
    master_ha: str = ""  # ... its HA address (slaves)
    changed: float = 0.0  # wall clock of the last write: its writer's clock sets it
    reason: str = ""

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["in_sync"] = list(self.in_sync)
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> GroupRecord | None:
        doc = _load(data, "group record")
        if doc is None:
            return None
        try:
            return cls(str(doc["master"]), int(doc["epoch"]),
                       tuple(str(n) for n in doc.get("in_sync", [])),
                       str(doc.get("master_addr", "")), str(doc.get("master_ha", "")),
                       float(doc.get("changed", 0.0)), str(doc.get("reason", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"group record lacks or mangles {exc}") from None

    def with_in_sync(self, names, changed: float) -> GroupRecord:
        rest = sorted(set(names) - {self.master})
        return replace(self, in_sync=(self.master, *rest), changed=changed, reason="in-sync set")


@dataclass(frozen=True)
class Registration:
    """A broker's ephemeral node: how to reach it."""

    name: str
    group: str
    addr: str
    http: str
    ha: str
    pid: int = 0
    epoch: int = 0  # the newest epoch its log has seen (a bootstrap starts above it)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> Registration | None:
        doc = _load(data, "broker registration")
        if doc is None:
            return None
        try:
            return cls(str(doc["name"]), str(doc["group"]), str(doc["addr"]),
                       str(doc.get("http", "")), str(doc["ha"]), int(doc.get("pid", 0)),
                       int(doc.get("epoch", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"broker registration lacks or mangles {exc}") from None


def read_record(zk, paths: Paths, group: str) -> tuple[GroupRecord | None, int]:
    """(record, version); (None, -1) if the group has none yet."""
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = zk.get(paths.record(group))
    except NoNodeError:
        return None, -1
    return GroupRecord.from_json(data), stat.version


def write_record(zk, paths: Paths, group: str, record: GroupRecord, version: int) -> bool:
    """Compare-and-set: False when someone else wrote (or created) it first."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    try:
        if version < 0:
            zk.ensure_path(paths.group(group))
            zk.create(paths.record(group), record.to_json())
        else:
            zk.set(paths.record(group), record.to_json(), version=version)
        return True
    except (BadVersionError, NodeExistsError, NoNodeError):
        return False


def add_event(zk, paths: Paths, doc: dict[str, Any]) -> None:
    """Append an event (a failover) and keep the last MAX_EVENTS."""
    zk.ensure_path(paths.events)
    zk.create(f"{paths.events}/e-", json.dumps(doc, sort_keys=True).encode(), sequence=True)
    names = sorted(zk.get_children(paths.events))
    for old in names[:-MAX_EVENTS]:
        zk.delete(f"{paths.events}/{old}")


def read_events(zk, paths: Paths, last: int = 50) -> list[dict[str, Any]]:
    from kazoo.exceptions import NoNodeError

    try:
        names = sorted(zk.get_children(paths.events))[-last:]
    except NoNodeError:
        return []
    out = []
    for name in names:
        try:
            doc = _load(zk.get(f"{paths.events}/{name}")[0], "event")
        except (NoNodeError, RecordError):
            continue
        if doc:
            out.append(doc)
    return out
