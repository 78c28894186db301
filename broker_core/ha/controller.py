"""The controller (`floodgate controller --zk ...`): fails masters over.

The Double-11 talk's design: the controller watches broker status and drives the state
machine kept in ZooKeeper; brokers report status and watch their role.
Several controllers may run; one leads (a kazoo Election) and the others
wait to take over. The leader reconciles every group whenever a
registration, a record or a down report changes (ZooKeeper watches), and
otherwise only when a look is owed (a new group's bootstrap wait, the grace
after its own link was down): an idle cluster's controller does nothing.

- a group with no record gets one when its brokers register: the broker with
  the longest log becomes master of an epoch above any its log has seen;
- a group whose master's registration is gone (its session ended) gets a new
  master: the in-sync slave, still registered, with the longest log (asked
  over HA_STATE), at epoch + 1. A master registered under another session
  than at the last look (restarted between two) is gone as well, and so is
  one its slave reported down whose ports refuse connections
  (`ha.down_reports`: a killed master, failed over without waiting for its
  session to end). No in-sync slave alive: nobody is promoted (that would
  lose acknowledged messages); the group waits for its master.

Writes are compare-and-set on the record's version, so a deposed leader that
still acts on an old read cannot promote twice. After the leader's own
ZooKeeper link was down (SUSPENDED or LOST) it waits one broker session
timeout before judging registrations: brokers whose sessions ended with the
outage register again in that time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from kazoo.exceptions import KazooException

from broker_core.ha.down_reports import clear_down, down_path, process_gone, read_down
from broker_core.ha.records import (
    SESSION_S,
    GroupRecord,
    Paths,
    RecordError,
    Registration,
    add_event,
    read_record,
    write_record,
)

log = logging.getLogger("floodgate.controller")

BOOTSTRAP_S = 0.5  # a new group waits this long for its other brokers to register
RETRY_S = 0.5  # a round cut short (ZooKeeper away, a bug) is tried again this soon


@dataclass(frozen=True)
class Decision:
    record: GroupRecord
    kind: str  # "create", "failover", "update"
    old_master: str = ""


def decide(record: GroupRecord | None, alive: dict[str, Registration],
           offsets: Callable[[list[str]], dict[str, int]], now: float,
           first_seen: float, expected: int = 0,
           gone_because: str = "lost its ZooKeeper session") -> Decision | None:
    """What to write for one group, or None. Pure, apart from asking offsets."""
    if record is None:
        if not alive or (now - first_seen < BOOTSTRAP_S and not 0 < expected <= len(alive)):
            return None  # let the group's other brokers register: the longest log wins
        chosen = _longest(sorted(alive), offsets)
        epoch = max(r.epoch for r in alive.values()) + 1
        reg = alive[chosen]
        return Decision(GroupRecord(chosen, epoch, (chosen,), reg.addr, reg.ha,
                                    reason="group created"), "create")
    if record.master in alive:
        reg = alive[record.master]
        if (reg.addr, reg.ha) != (record.master_addr, record.master_ha):  # restarted elsewhere
            return Decision(GroupRecord(record.master, record.epoch, record.in_sync, reg.addr,
                                        reg.ha, reason="master's address changed"), "update")
        return None
    candidates = sorted(n for n in record.in_sync if n != record.master and n in alive)
    if not candidates:
        return None
    chosen = _longest(candidates, offsets)
    reg = alive[chosen]
    new = GroupRecord(chosen, record.epoch + 1, (chosen,), reg.addr, reg.ha,
                      reason=f"failover: {record.master} {gone_because}")
    return Decision(new, "failover", record.master)


def _longest(names: list[str], offsets: Callable[[list[str]], dict[str, int]]) -> str:
    found = offsets(names)
    return max(names, key=lambda n: (found.get(n, -1), -names.index(n)))


class Controller:
    def __init__(self, zk_hosts: str, cluster: str, *, session_s: float = SESSION_S,
                 broker_session_s: float = SESSION_S, name: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 log_ends: Callable[[dict[str, Registration]], dict[str, int]] | None = None,
                 events=None) -> None:
        """`log_ends(registrations)`: each live broker's log end, asked of the brokers
        themselves (`cluster.roles.log_ends`, the controller command's); a broker left
        out did not answer. Without it every log counts as equally long. Passed in
        because asking a broker is client work, which this room does not import.
        `events`: an observe.events.EventLog each failover is appended to as well."""
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self.paths = Paths(cluster)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.zk = KazooClient(hosts=zk_hosts, timeout=session_s,
                              connection_retry=KazooRetry(max_tries=-1, max_delay=0.5),
                              command_retry=KazooRetry(max_tries=5, delay=0.05, max_delay=0.5))
        self.broker_session_s = broker_session_s
        self._clock = clock
        self._wall = wall  # stamps the records and events it writes
        self._log_ends = log_ends or (lambda regs: {})
        self.events = events
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._grace_until = 0.0
        self._link_was_down = False  # its ZooKeeper link was SUSPENDED or LOST since connected
        self._lost = threading.Event()
        self._first_seen: dict[str, float] = {}
        # group -> (its master, epoch, that master's ZooKeeper session) at the last look
        self._master_sessions: dict[str, tuple[str, int, int]] = {}
        self._watched: set[str] = set()
        self._waiting_logged: set[tuple[str, int]] = set()
        self.leading = False
        self.decisions: list[Decision] = []
        self.next_look: float | None = None  # (clock) a round owed without a watch firing
        self.rounds = 0
        self._gone: set[tuple[str, str, int]] = set()  # (group, master, epoch) seen dead

    # -- running ----------------------------------------------------------------------
    def run(self) -> None:
        """Block: join the election, lead when chosen, until `stop()`."""
        self.zk.add_listener(self._on_state)
        try:
            self.zk.start(timeout=15)
        except Exception as exc:  # kazoo's timeout is a bare Exception subclass
            raise RecordError(f"ZooKeeper unreachable: {exc}") from None
        election = self.zk.Election(self.paths.election, self.name)
        while not self._stop.is_set():
            try:
                self.zk.retry(self.zk.ensure_path, self.paths.groups)
                election.run(self._lead)
            except KazooException as exc:  # session trouble: stand again
                if not self._stop.is_set():
                    log.warning("election round ended: %s", type(exc).__name__)
            except Exception:  # noqa: BLE001
                log.exception("election round failed")
            if not self._stop.is_set():
                self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass

    def _on_state(self, state) -> None:
        from kazoo.protocol.states import KazooState

        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._link_was_down = True
            self._grace_until = float("inf")  # judge nothing until reconnected + a session
            # nor a session that changed meanwhile: the outage may have ended it (replaced,
            # not cleared: the leader's thread may be reading it)
            self._master_sessions = {}
            if state == KazooState.LOST:
                self._lost.set()
        elif self._link_was_down:  # back after an outage (not the first connection: a
            # controller just started has no earlier view to doubt, and judged nothing for
            # 9 s, each `cluster up` waiting on it)
            self._link_was_down = False
            self._grace_until = self._clock() + self.broker_session_s * 1.5
        self._dirty.set()

    def _lead(self) -> None:
        self.leading = True
        self._lost.clear()
        self._master_sessions = {}  # what another leader saw meanwhile is not ours to judge
        log.warning("controller %s leads cluster %s", self.name, self.paths.cluster)
        try:
            self.zk.ChildrenWatch(self.paths.groups, self._on_groups)
            self._dirty.set()  # the first round at once
            while not self._stop.is_set() and not self._lost.is_set():
                due = self.next_look
                self._dirty.wait(None if due is None else max(0.0, due - self._clock()))
                self._dirty.clear()
                if self._stop.is_set() or self._lost.is_set():
                    break
                self.next_look = None
                try:
                    self.reconcile()
                except KazooException as exc:  # ZooKeeper away mid-round: next round
                    log.warning("reconcile round cut short: %s", type(exc).__name__)
                    self._owe(self._clock() + RETRY_S)
                except Exception:  # noqa: BLE001 - a bug must not end leadership silently
                    log.exception("reconcile round failed")
                    self._owe(self._clock() + RETRY_S)
        finally:
            self.leading = False
            if self._stop.is_set():  # stopped: a clean leave, nothing for an operator
                log.info("controller %s stopped leading", self.name)
            else:
                log.warning("controller %s no longer leads", self.name)

    def _on_groups(self, _groups) -> bool:
        self._dirty.set()  # the leader's thread watches new groups (no blocking call here)
        return not self._stop.is_set()

    def _owe(self, when: float) -> None:
        """A round is owed by `when` (the earliest asked wins)."""
        if self.next_look is None or when < self.next_look:
            self.next_look = when

    def _watch(self, group: str) -> None:
        if group in self._watched:
            return
        self.zk.retry(self.zk.ensure_path, self.paths.brokers(group))
        self._watched.add(group)
        self.zk.ChildrenWatch(self.paths.brokers(group), lambda _c: self._dirty.set())
        self.zk.DataWatch(self.paths.record(group), lambda *_a: self._dirty.set())
        self.zk.DataWatch(down_path(self.paths, group), lambda *_a: self._dirty.set())

    # -- one round ------------------------------------------------------------------------
    def reconcile(self) -> list[Decision]:
        from kazoo.exceptions import NoNodeError

        self.rounds += 1
        if self._clock() < self._grace_until:
            if self._grace_until != float("inf"):  # reconnected: judge once it is over
                self._owe(self._grace_until)
            return []
        made = []
        zk, retry = self.zk, self.zk.retry  # a dropped connection (not a lost session) retries
        for group in sorted(retry(zk.get_children, self.paths.groups)):
            self._watch(group)
            alive, sessions = {}, {}
            try:
                names = retry(zk.get_children, self.paths.brokers(group))
            except NoNodeError:
                names = []
            for name in names:
                try:
                    data, stat = retry(zk.get, self.paths.broker(group, name))
                    reg = Registration.from_json(data)
                except (NoNodeError, RecordError):
                    continue
                if reg is not None:
                    alive[name], sessions[name] = reg, stat.ephemeralOwner
            record, version = retry(read_record, zk, self.paths, group)
            now = self._clock()
            first = self._first_seen.setdefault(group, now) if alive else now
            gone_because = "lost its ZooKeeper session"
            if self._reported_gone(group, record, alive):
                alive.pop(record.master)
                gone_because = "was reported down and its ports refuse connections"

            def ends(names, a=alive):
                return self._log_ends({k: a[k] for k in names})

            decision = None
            if self._master_restarted(group, record, sessions):  # gone, if only between looks
                decision = decide(record, {k: v for k, v in alive.items() if k != record.master},
                                  ends, now, first)
            decision = decision or decide(record, alive, ends, now, first,
                                          gone_because=gone_because)
            if decision is None:
                if record is None and alive:  # bootstrapping: look again when it is over
                    self._owe(first + BOOTSTRAP_S)
                self._note_waiting(group, record, alive)
                continue
            if self._clock() < self._grace_until or self._lost.is_set():
                return made  # the link went down while we looked: decide nothing
            decision = replace(decision, record=replace(decision.record, changed=self._wall()))
            # a retried write that had landed fails its version check: read again next round
            if retry(write_record, zk, self.paths, group, decision.record, version):
                made.append(decision)
                self._announce(group, decision, record)
                if decision.kind == "failover":
                    retry(clear_down, zk, self.paths, group)
        self.decisions.extend(made)
        return made

    def _reported_gone(self, group: str, record: GroupRecord | None,
                       alive: dict[str, Registration]) -> bool:
        """The group's slave reported its master down (ha.down_reports) and the master's
        ports refuse connections: its process is gone, whatever its session says. Its
        registration is deleted (a restart registers at once) and the report dropped; a
        report of anyone else, or not confirmed, is only dropped."""
        zk = self.zk
        report = zk.retry(read_down, zk, self.paths, group)
        if report is None:
            return False
        key = (group, report.master, report.epoch)
        if record is None or (report.master, report.epoch) != (record.master, record.epoch):
            zk.retry(clear_down, zk, self.paths, group)
            return False
        if record.master not in alive:
            return False  # gone anyway: the failover clears the report
        reg = alive[record.master]
        if key not in self._gone and not process_gone([reg.addr, reg.ha]):
            log.info("group=%s %s reported %s down (%s), but its ports answer: not failed "
                     "over", group, report.by, report.master, report.reason)
            zk.retry(clear_down, zk, self.paths, group)
            return False
        self._gone.add(key)
        log.warning("group=%s master %s reported down by %s (%s) and its ports refuse "
                    "connections: its process is gone", group, report.master, report.by,
                    report.reason)
        from kazoo.exceptions import NoNodeError

        try:
            zk.retry(zk.delete, self.paths.broker(group, record.master))
        except NoNodeError:
            pass
        return True

    def _master_restarted(self, group: str, record: GroupRecord | None,
                          sessions: dict[str, int]) -> bool:
        """The record's master registered under another session than at the last look: its
        session ended and it registered again in between (a supervisor's quick restart), so
        its group failed over as if this round had seen it gone. Without this, a restart
        that registered within a round of its old session's end kept its group at the old
        epoch with the slave never promoted (a CI run of the demo's kill act)."""
        if record is None or record.master not in sessions:
            self._master_sessions.pop(group, None)
            return False
        now = (record.master, record.epoch, sessions[record.master])
        seen = self._master_sessions.get(group)
        self._master_sessions[group] = now
        return seen is not None and seen[:2] == now[:2] and seen[2] != now[2]

    def _announce(self, group: str, decision: Decision, old: GroupRecord | None) -> None:
        rec = decision.record
        log.warning("group=%s %s master=%s epoch=%d in_sync=%s%s", group, decision.kind,
                    rec.master, rec.epoch, ",".join(rec.in_sync),
                    f" old_master={decision.old_master}" if decision.old_master else "")
        if decision.kind == "failover":
            doc = {"time": self._wall(), "kind": "failover", "group": group,
                   "old_master": decision.old_master, "new_master": rec.master,
                   "epoch": rec.epoch, "controller": self.name,
                   "down_since": old.changed if old else None}
            try:
                add_event(self.zk, self.paths, doc)
            except Exception:  # noqa: BLE001 - the failover stands without its event
                log.exception("recording the failover event")
            self._log_failover(doc)

    def _log_failover(self, doc: dict) -> None:
        """The failover in the events log too (the post-mortem's timeline)."""
        if self.events is None:
            return
        text = (f"{doc['group']} failed over: {doc['new_master']} master at epoch "
                f"{doc['epoch']} (was {doc['old_master']})")
        try:
            self.events.append("failover", text, severity="warning", subject=doc["group"],
                               at=doc["time"],
                               **{k: doc[k] for k in ("old_master", "new_master", "epoch")})
        except OSError:
            log.exception("writing the failover to the events log")

    def _note_waiting(self, group: str, record: GroupRecord | None, alive: dict) -> None:
        if record is None or record.master in alive:
            return
        key = (group, record.epoch)
        if key not in self._waiting_logged:
            self._waiting_logged.add(key)
            log.error("group=%s master %s is gone and no in-sync slave is registered "
                      "(in_sync=%s): waiting for it to return", group, record.master,
                      ",".join(record.in_sync))
