"""HaNode: one broker's part in its group — its role, its epoch, and the two sides
of replication it runs depending on that role.

Roles come from outside (the group record in ZooKeeper, through
`ha.membership`; tests call `become_master`/`become_slave` directly):

- MASTER: takes sends, streams its log to slaves (`ha.master`), and in sync
  mode answers a send only once every in-sync slave holds it;
- SLAVE: refuses sends (NOT_MASTER, naming the master), serves pulls, and
  follows its master (`ha.slave`);
- NONE: no role yet (or lost it): refuses sends, serves pulls.

Everything here runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from broker_core.ha.epochs import EpochFile
from broker_core.ha.group_meta import adopt_meta, meta_doc, records_arrived
from broker_core.ha.master import ReplicationMaster
from broker_core.ha.master_figures import in_sync_silence, slave_figures
from broker_core.ha.slave import MasterInfo, ReplicaClient
from broker_core.protocol import Code

log = logging.getLogger("floodgate.ha")


# a master whose in-sync slaves have been silent this long while ZooKeeper is away takes
# no send: well inside the shortest session (1 s) after which a slave may be promoted
CUT_OFF_S = 0.5


class Role(StrEnum):
    MASTER = "MASTER"
    SLAVE = "SLAVE"
    NONE = "NONE"


@dataclass(frozen=True)
class HaSettings:
    group: str
    ha_port: int
    replication: str = "async"  # or "sync"
    sync_timeout_s: float = 3.0


class HaNode:
    def __init__(self, broker, settings: HaSettings,
                 persist_isr: Callable[[frozenset[str]], Awaitable[bool]] | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.broker, self.settings = broker, settings
        self.name, self.group = broker.config.name, settings.group
        self.sync = settings.replication == "sync"
        self.wall = wall  # event times, and what the membership stamps on records
        ha_dir = Path(broker.config.data_dir) / "ha"
        ha_dir.mkdir(parents=True, exist_ok=True)
        self.epochs = EpochFile(ha_dir / "epochs.json")
        self.role = Role.NONE
        self.epoch = 0  # the newest epoch of the group this broker knows of
        self.master_name = ""
        self.master_addr = ""
        self.since = wall()
        # False while the membership's ZooKeeper link is down (SUSPENDED or LOST)
        self.zk_connected = True
        self.events: deque[dict] = deque(maxlen=50)
        self.master = ReplicationMaster(
            broker.store, self.group, sync=self.sync, timeout_s=settings.sync_timeout_s,
            epoch=lambda: self.epoch, history=lambda: self.epochs.history,
            is_master=lambda: self.role is Role.MASTER, meta=self._meta,
            meta_version=broker.meta_version, persist=persist_isr)
        self.master.readable = self._readable
        self.slave: ReplicaClient | None = None
        self.membership = None  # ha.membership.Membership, when ZooKeeper drives the role
        self._server: asyncio.base_events.Server | None = None

    def _readable(self, touched: set[tuple[str, int]]) -> None:
        """The in-sync slaves acked records of these queues: readers may take them."""
        for topic, qid in touched:
            self.broker.pulls.readable(topic, qid)

    def attach(self) -> HaNode:
        """Hook into the broker: sends ask this node for the role and, in sync mode,
        wait for the slaves' acks."""
        self.broker.ha = self
        self.broker.write_path.replication = self
        return self

    @property
    def ha_addr(self) -> str:
        return f"{self.broker.config.bind}:{self.settings.ha_port}"

    async def start(self) -> None:
        self._server = await asyncio.get_running_loop().create_server(
            self.master.link_factory, self.broker.config.bind, self.settings.ha_port,
            reuse_address=True, ssl=self.broker.tls)

    async def close(self) -> None:
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None
        self.master.stop()
        if self._server is not None:
            self._server.close()
            self._server = None

    # -- the broker's hooks ---------------------------------------------------------
    def refusal(self) -> tuple[int, bytes] | None:
        """Why this broker takes no send now (NOT_MASTER and who is), or None."""
        if self.role is Role.MASTER:
            return None if self.zk_connected else self._cut_off()
        where = (f"master is {self.master_name} at {self.master_addr}" if self.master_name
                 else "no master known")
        return Code.NOT_MASTER, (f"{self.name} is {self.role.value.lower()} of group "
                                 f"{self.group} (epoch {self.epoch}); {where}").encode()

    def _cut_off(self) -> tuple[int, bytes] | None:
        """A sync master that hears neither ZooKeeper nor its in-sync slaves may have
        been replaced on the other side of a partition: it stores nothing more (a
        one-copy answer, FLUSH_SLAVE_TIMEOUT, would be cut when it follows again).
        ZooKeeper alone away (its slaves keep up) changes nothing: nobody can promote."""
        if not self.sync:
            return None
        silent = in_sync_silence(self.master)
        if silent is None or silent < CUT_OFF_S:
            return None
        return Code.NOT_MASTER, (f"{self.name} hears neither ZooKeeper nor its in-sync "
                                 f"slaves ({silent:.1f} s): it may have been replaced as "
                                 f"master of group {self.group}; nothing was stored").encode()

    def appended(self, end: int) -> None:
        self.master.appended(end)

    async def wait_replicated(self, end: int) -> Code:
        if self.role is not Role.MASTER:
            return Code.NOT_MASTER
        return await self.master.wait(end) if self.sync else Code.OK

    def park(self, end: int, done: Callable[[Code], None]) -> Code | None:
        """How a send ending at `end` is answered: a code now, or None and `done(code)`
        once the in-sync slaves hold it (or time out, or this broker is demoted)."""
        if self.role is not Role.MASTER:
            return Code.NOT_MASTER
        return self.master.park(end, done) if self.sync else Code.OK

    # -- role changes -----------------------------------------------------------------
    async def become_master(self, epoch: int, in_sync: frozenset[str] = frozenset(),
                            reason: str = "") -> None:
        """`reason`: why the record names it (the controller's words), for its events."""
        if self.role is Role.MASTER and epoch == self.epoch:
            return
        if self.slave is not None:
            await self.slave.stop()  # no byte of the old master after this point
            self.slave = None
        replica = self.broker.store.replica_log()
        if replica.received > replica.offset:  # a record only partly received: not ours
            replica.truncate(replica.offset)
        start = self.broker.store.commitlog.write_offset
        if epoch > self.epochs.history.last_epoch:
            self.epochs.begin(epoch, start)
        self.epoch, self.role = epoch, Role.MASTER
        self.master_name, self.master_addr = self.name, self.broker.config.addr
        self.master.start(frozenset(in_sync) - {self.name})
        self._event("master", f"epoch {epoch}, log at {start}" + (f"; {reason}" if reason
                                                                   else ""))
        self.broker.role_changed()

    async def become_slave(self, master: MasterInfo, master_addr: str) -> None:
        following = self.slave.master if self.slave is not None else None
        if (self.role is Role.SLAVE and following is not None
                and (following.name, following.ha_addr) == (master.name, master.ha_addr)):
            self.epoch = max(self.epoch, master.epoch)
            return
        if self.role is Role.MASTER:
            self.master.stop()  # parked sends answer NOT_MASTER: not acknowledged
        if self.slave is not None:
            await self.slave.stop()
        self.epoch = max(self.epoch, master.epoch)
        self.role = Role.SLAVE
        self.master_name, self.master_addr = master.name, master_addr
        self.slave = ReplicaClient(
            self.broker.store, self.epochs, self.name, self.group, master,
            known_epoch=lambda: self.epoch, on_records=self._on_records,
            on_meta=self._on_meta, on_truncate=self._on_truncate, tls=self.broker.tls_peer,
            on_refused=self._master_refused)
        self.slave.start()
        self._event("slave", f"of {master.name} (epoch {master.epoch})")
        self.broker.role_changed()

    async def step_down(self, reason: str) -> None:
        """No role (e.g. the group record names nobody this broker can follow)."""
        if self.role is Role.NONE:
            return
        if self.role is Role.MASTER:
            self.master.stop()
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None
        self.role = Role.NONE
        self._event("none", reason)
        self.broker.role_changed()

    def learn_epoch(self, epoch: int) -> None:
        """A newer epoch exists (seen in the record): links of older ones are fenced."""
        self.epoch = max(self.epoch, epoch)

    def _event(self, kind: str, detail: str) -> None:
        self.since = self.wall()
        self.events.append({"time": self.since, "kind": kind, "detail": detail,
                            "epoch": self.epoch})
        log.warning("ha role group=%s broker=%s role=%s epoch=%d %s", self.group, self.name,
                    self.role.value, self.epoch, detail)

    # -- replicated side effects ---------------------------------------------------------
    def _on_records(self, touched: set[tuple[str, int]]) -> None:
        records_arrived(self.broker, touched)

    def _on_meta(self, doc: dict) -> None:
        adopt_meta(self.broker, doc)

    def _master_refused(self, master: MasterInfo) -> None:
        """The master's HA port refuses connections: tell the controller (through
        ZooKeeper) rather than wait for its session to end (ha.down_reports)."""
        self._event("master-refused", f"{master.name}'s HA port refuses connections")
        if self.membership is not None:
            asyncio.ensure_future(self.membership.report_down(master.name, master.epoch,
                                                              "its HA port refuses connections"))

    def _on_truncate(self, offset: int, cut: int) -> None:
        self.events.append({"time": self.wall(), "kind": "truncated",
                            "detail": f"log cut at {offset}: {cut} bytes the master never had",
                            "epoch": self.epoch, "bytes": cut})

    def _meta(self) -> dict:
        return meta_doc(self.broker)

    # -- figures -------------------------------------------------------------------------
    def figures(self) -> dict:
        doc = {"group": self.group, "role": self.role.value, "epoch": self.epoch,
               "replication": self.settings.replication, "ha_addr": self.ha_addr,
               "master": self.master_name, "since": self.since,
               "history": self.epochs.history.to_list()[-5:],
               "events": list(self.events)[-10:], **self.master.counters}
        if self.membership is not None:
            doc.update(self.membership.figures())
        if self.role is Role.MASTER:
            doc["in_sync"] = sorted(self.master.in_sync)
            doc["slaves"] = slave_figures(self.master)
            if (gate := self.master.gate) is not None:  # stored, not readable yet
                doc["unconfirmed_msgs"] = sum(gate.waiting.values())
        elif self.slave is not None:
            doc["following"] = self.slave.figures()
        return doc
