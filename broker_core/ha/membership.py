"""A broker's membership of its group in ZooKeeper: register, watch the record, obey.

The broker holds an ephemeral registration (it vanishes when the session
ends: that is how the controller learns a master died) and watches its
group's record; every version of the record is applied on the broker's
loop, newest wins: named master -> MASTER of that epoch, anyone else named
-> SLAVE following them. The role never comes from a flag.

While ZooKeeper is unreachable (SUSPENDED) the broker keeps its role: a
sync master still needs its slaves' acks, so a partitioned master cannot
acknowledge what a promoted slave lacks; and a sync master that hears neither
ZooKeeper nor its in-sync slaves stores nothing more (HaNode._cut_off). After a session loss it registers
again under a new session as soon as it can.

kazoo calls back on its own thread; everything that touches the broker is
handed to the loop with call_soon_threadsafe, every blocking ZooKeeper call
made from the loop goes through run_in_executor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

from broker_core.errors import BrokerError
from broker_core.ha.node import HaNode
from broker_core.ha.records import (
    SESSION_S,
    GroupRecord,
    Paths,
    Registration,
    read_record,
    write_record,
)
from broker_core.ha.slave import MasterInfo

log = logging.getLogger("floodgate.ha")

HANDOVER_S = 1.0  # after our old session's node ends, before registering again (below)


class Membership:
    def __init__(self, node: HaNode, zk_hosts: str, cluster: str, session_s: float = SESSION_S,
                 http_addr: str = "") -> None:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self.node, self.paths = node, Paths(cluster)
        self.zk = KazooClient(hosts=zk_hosts, timeout=session_s,
                              connection_retry=KazooRetry(max_tries=-1, max_delay=0.5),
                              command_retry=KazooRetry(max_tries=5, delay=0.05, max_delay=0.5))
        self.hosts = zk_hosts
        self.http_addr = http_addr
        self.state = "NEW"
        self.sessions = 0  # registrations made (1 + re-registrations after a session loss)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._latest: GroupRecord | None = None
        self._applying: asyncio.Task | None = None
        self._lost = False
        self._closed = threading.Event()
        self.record: GroupRecord | None = None  # the last applied

    # -- lifecycle ----------------------------------------------------------------
    async def start(self, timeout: float = 15.0) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self._loop.run_in_executor(None, lambda: self.zk.start(timeout=timeout))
        except Exception as exc:  # kazoo's timeout is a plain Exception subclass
            raise BrokerError(f"ZooKeeper at {self.hosts} unreachable: {exc}") from None
        self.zk.add_listener(self._on_state)
        self.state = "CONNECTED"
        await self._loop.run_in_executor(None, self._register)
        self.zk.DataWatch(self.paths.record(self.node.group), self._on_record)

    async def close(self) -> None:
        """Leave: the session ends now (the registration goes at once, not a timeout later)."""
        self._closed.set()
        if self._applying is not None:
            self._applying.cancel()
        loop = self._loop or asyncio.get_running_loop()
        await loop.run_in_executor(None, self._stop_zk)

    def _stop_zk(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001 - leaving anyway
            log.exception("closing the ZooKeeper session")

    # -- registration -------------------------------------------------------------
    def registration(self) -> Registration:
        cfg = self.node.broker.config
        return Registration(self.node.name, self.node.group, cfg.addr, self.http_addr,
                            self.node.ha_addr, os.getpid(), self.node.epochs.history.last_epoch)

    def _register(self) -> None:
        """Create the ephemeral node; a leftover of our own previous session (a fast
        restart) blocks the name until that session expires: wait for it, then for
        HANDOVER_S more, so the controller sees this broker gone before it is back.
        Registered within 0.1 s of the old node's end, a restarted master was at
        times seen by the controller as never gone: it kept its group at the old
        epoch and the slave was not promoted (a CI run of the demo's kill act)."""
        from kazoo.exceptions import NodeExistsError

        path = self.paths.broker(self.node.group, self.node.name)
        retry = self.zk.retry  # a dropped connection (not a lost session) is retried
        retry(self.zk.ensure_path, self.paths.brokers(self.node.group))
        data = self.registration().to_json()
        deadline = time.monotonic() + 120
        blocked = False
        while not self._closed.is_set():
            if blocked and retry(self.zk.exists, path) is None:
                blocked = False
                if self._closed.wait(HANDOVER_S):
                    return
            try:
                retry(self.zk.create, path, data, ephemeral=True)
                self.sessions += 1
                log.info("registered %s (session 0x%x)", path, self.zk.client_id[0])
                return
            except NodeExistsError:
                stat = retry(self.zk.exists, path)
                if stat is not None and stat.ephemeralOwner == self.zk.client_id[0]:
                    return
                if time.monotonic() > deadline:
                    raise BrokerError(f"{path} held by another live session: is a broker "
                                      f"named {self.node.name} running elsewhere?") from None
                blocked = True
                time.sleep(0.1)

    def _on_state(self, state) -> None:
        from kazoo.protocol.states import KazooState

        self.state = str(state)
        connected = state == KazooState.CONNECTED
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(setattr, self.node, "zk_connected", connected)
        else:
            self.node.zk_connected = connected
        if state == KazooState.LOST:
            self._lost = True
            if self._closed.is_set():  # our own close() ended it: a clean leave
                log.info("ZooKeeper session closed: left group %s", self.node.group)
            else:
                log.warning("ZooKeeper session lost: registering again once reconnected")
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper unreachable: keeping role %s", self.node.role.value)
        elif state == KazooState.CONNECTED and self._lost and not self._closed.is_set():
            self._lost = False
            self.zk.handler.spawn(self._register_safely)

    def _register_safely(self) -> None:
        try:
            self._register()
        except Exception:  # noqa: BLE001 - logged; the next reconnect tries again
            log.exception("registering again failed")

    # -- the record -----------------------------------------------------------------
    def _on_record(self, data, _stat, *_event) -> None:
        if self._closed.is_set():
            return False  # stop watching
        try:
            record = GroupRecord.from_json(data)
        except BrokerError as exc:
            log.error("ignoring the group record of %s: %s", self.node.group, exc)
            return None
        if record is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._schedule, record)
        return None

    def _schedule(self, record: GroupRecord) -> None:
        self._latest = record
        if self._applying is None or self._applying.done():
            self._applying = asyncio.ensure_future(self._apply_latest())

    async def _apply_latest(self) -> None:
        while self._latest is not None and self._latest != self.record:
            record = self._latest
            try:
                await self.apply(record)
            except Exception:  # noqa: BLE001 - e.g. a full disk while cutting a tail: retry
                log.exception("applying the group record failed; trying again in 1 s")
                await asyncio.sleep(1.0)
                continue
            self.record = record

    async def apply(self, record: GroupRecord) -> None:
        node = self.node
        node.learn_epoch(record.epoch)
        if record.master == node.name:
            await node.become_master(record.epoch, frozenset(record.in_sync), record.reason)
        else:
            await node.become_slave(MasterInfo(record.master, record.master_ha, record.epoch),
                                    record.master_addr)

    async def persist_isr(self, in_sync: frozenset[str]) -> bool:
        """The master records its in-sync set (compare-and-set, only while the record
        still names it master of its epoch)."""
        node = self.node
        me, epoch = node.name, node.epoch

        def write() -> bool:
            retry = self.zk.retry
            record, version = retry(read_record, self.zk, self.paths, node.group)
            if record is None or record.master != me or record.epoch != epoch:
                return False
            if set(record.in_sync) == set(in_sync) | {me}:
                return True
            # a retried write that had landed fails its version check: False, and the
            # ISR loop tries again from a fresh read
            return retry(write_record, self.zk, self.paths, node.group,
                         record.with_in_sync(in_sync | {me}, node.wall()), version)

        if self._closed.is_set():
            return False  # left the group: nothing is recorded in its name
        loop = self._loop or asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, write)
        except Exception:
            if self._closed.is_set():  # the session closed under the write: a clean stop
                return False
            raise

    async def report_down(self, master: str, epoch: int, reason: str) -> None:
        """Tell the controller this broker's master looks dead (it checks for itself)."""
        from broker_core.ha.down_reports import DownReport, report_down

        if self._closed.is_set():
            return
        report = DownReport(master, epoch, self.node.name, reason, self.node.wall())
        loop = self._loop or asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, lambda: self.zk.retry(
                report_down, self.zk, self.paths, self.node.group, report))
        except Exception:  # noqa: BLE001 - the session's end is the slower way
            log.exception("reporting %s down", master)

    def figures(self) -> dict:
        return {"zk": self.hosts, "zk_state": self.state, "registrations": self.sessions}
