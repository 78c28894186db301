"""What clients ask of a replicated cluster's routes (ha.routes.ZkRoutes, from
ZooKeeper's group records; ha.raft_routes.RaftRoutes, from raft members)."""

from __future__ import annotations

import threading

from broker_core.errors import BrokerError
from broker_core.ha.records import GroupRecord


class GroupRoutes:
    """What clients ask of a replicated cluster's routes, whoever keeps `records` (group
    -> GroupRecord, replaced whole) and `members` and notifies `_changed`."""

    members: dict[str, list[str]]
    records: dict[str, GroupRecord]
    version: int
    _changed: threading.Condition
    what = "master"

    @property
    def groups(self) -> list[str]:
        return sorted(self.members)

    def masters(self) -> dict[str, str]:
        """group -> its master's TCP address ("" while it has none)."""
        records = self.records
        return {g: (records[g].master_addr if g in records else "") for g in self.groups}

    def master(self, group: str) -> str:
        rec = self.records.get(group)
        return rec.master_addr if rec is not None else ""

    def replicas(self, group: str) -> list[str]:
        """The group's brokers, its master first: where a reader may go."""
        master = self.master(group)
        rest = [a for a in self.members.get(group, []) if a != master]
        return [master, *rest] if master else rest

    def wait(self, timeout: float = 10.0) -> dict[str, str]:
        """Block until every group has a master; returns masters()."""
        with self._changed:
            ok = self._changed.wait_for(lambda: all(self.masters().values()), timeout)
        if not ok:
            missing = [g for g, a in self.masters().items() if not a]
            raise BrokerError(f"no {self.what} for group(s) {', '.join(missing)} "
                              f"after {timeout:g} s")
        return self.masters()

    def wait_change(self, version: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.version != version, timeout)
