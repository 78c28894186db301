"""The master's side of replication: stream the CommitLog to slaves, count their acks.

Runs on the broker's event loop. Each slave link (`ha.master_link.SlaveLink`)
streams what accumulated since its last transfer and reads the slave's acks. A
send in sync mode parks its answer: a callback keyed by the record's end offset
that the acks release (or a sweep, armed for the oldest one's timeout, times out): no
task, no future and no loop turn blocks on a slave.

The in-sync set: the slaves whose acks a sync send waits for, all of them
(Kafka's acks=all over its ISR). Any slave in the set therefore holds every
acknowledged message, and the controller promotes only from the set as the
group record in ZooKeeper lists it. To keep "local set ⊇ recorded set": a
slave joins locally before the record says so and leaves the record before
it leaves locally (`persist` is the record's compare-and-set write).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from broker_core.deadline import Deadline
from broker_core.ha import wire
from broker_core.ha.append_marks import AppendMarks
from broker_core.ha.epochs import EpochHistory, consistent_end
from broker_core.ha.master_link import SlaveLink
from broker_core.protocol import Code
from broker_core.store import MessageStore
from broker_core.store.confirm_gate import ConfirmGate

log = logging.getLogger("floodgate.ha")

JOIN_LAG_S = 0.5  # a slave this close behind joins the in-sync set
SWEEP_S = 0.05  # the soonest one sweep follows another
ISR_RETRY_S = 0.25  # an in-sync change ZooKeeper did not take (away?) is tried again


class ReplicationMaster:
    def __init__(self, store: MessageStore, group: str, *, sync: bool, timeout_s: float,
                 epoch: Callable[[], int], history: Callable[[], EpochHistory],
                 is_master: Callable[[], bool], meta: Callable[[], dict],
                 meta_version: Callable[[], int] = lambda: 0,
                 persist: Callable[[frozenset[str]], Awaitable[bool]] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.store, self.group = store, group
        self.sync, self.timeout_s = sync, timeout_s
        self._epoch, self._history, self._is_master = epoch, history, is_master
        self._meta, self._meta_version, self._persist = meta, meta_version, persist
        self._clock, self._wall = clock, wall
        self.links: dict[str, SlaveLink] = {}
        self.in_sync: set[str] = set()  # slaves (not the master itself)
        self.acked: dict[str, int] = {}  # slave -> offset it holds, kept across its links
        # parked sends: a heap of (end offset, seq, waiter) and their deadlines, oldest
        # first; a waiter is [callback], emptied ([None]) once answered
        self._waiters: list[tuple[int, int, list]] = []
        self._deadlines: deque[tuple[float, list]] = deque()
        self._seq = itertools.count()
        self._marks = AppendMarks(store.commitlog.write_offset)  # lag in seconds
        self._isr_wake = asyncio.Event()
        self._isr_task: asyncio.Task | None = None
        # timed-out parked sends and slaves falling out of sync, looked at when one can
        # be due: nothing parked and everything acked, nothing is armed
        self._sweeper = Deadline(self._tick, "replication sweep")
        self._started = False
        self._isr_gen = 0
        # sync: readers see what every in-sync slave holds (store.confirm_gate); `readable`
        # is told the queues that grew (their held pulls wake)
        self.gate = store.gate = ConfirmGate() if sync else None
        self.readable: Callable[[set[tuple[str, int]]], None] | None = None
        self.counters = {"slave_timeouts": 0, "slave_not_available": 0, "isr_changes": 0,
                         "truncations_ordered": 0, "links_refused": 0}

    # -- the write path's side -----------------------------------------------------
    def appended(self, end: int) -> None:
        """A record ending at `end` is in the log: wake the links, remember when."""
        self._marks.mark(end, self._clock())
        for link in self.links.values():
            link.kick()
        if self._started and self._sweeper.when is None:  # unacked: a slave's lag grows
            self._sweeper.after(self.timeout_s)

    def _target(self) -> int:
        """The offset every in-sync slave holds (-1: no slave in sync)."""
        return min((self.acked.get(n, -1) for n in self.in_sync), default=-1)

    def park(self, end: int, done: Callable[[Code], None]) -> Code | None:
        """A code now (OK: the in-sync slaves hold `end` already; SLAVE_NOT_AVAILABLE:
        no slave is in sync), or None and `done(code)` later: OK once they all hold
        it, FLUSH_SLAVE_TIMEOUT after `timeout_s`, NOT_MASTER if demoted meanwhile.
        Acks release waiters in offset order; the sweep times out the old."""
        refused = self._no_slave()
        if refused is not None:
            return refused
        if self._target() >= end:
            return Code.OK
        waiter = [done]
        heapq.heappush(self._waiters, (end, next(self._seq), waiter))
        self._deadlines.append((self._clock() + self.timeout_s, waiter))
        if self._started and self._sweeper.when is None:
            self._sweeper.after(self.timeout_s)
        return None

    def _no_slave(self) -> Code | None:
        if self.in_sync:
            return None
        self.counters["slave_not_available"] += 1
        return Code.SLAVE_NOT_AVAILABLE

    async def wait(self, end: int) -> Code:
        fut = asyncio.get_running_loop().create_future()
        code = self.park(end, lambda c: fut.done() or fut.set_result(c))
        return code if code is not None else await fut

    def _sweep(self) -> None:
        now, deadlines = self._clock(), self._deadlines
        timed_out = 0
        while deadlines and (deadlines[0][0] <= now or deadlines[0][1][0] is None):
            _d, waiter = deadlines.popleft()
            done = waiter[0]
            if done is not None:
                waiter[0] = None
                done(Code.FLUSH_SLAVE_TIMEOUT)
                timed_out += 1
        if timed_out:
            self.counters["slave_timeouts"] += timed_out
            self._isr_wake.set()  # a slave that let a send time out is no longer in sync
        if len(self._waiters) > 4 * len(deadlines) + 1024:  # drop answered ones
            self._waiters = [w for w in self._waiters if w[2][0] is not None]
            heapq.heapify(self._waiters)

    def _release(self) -> None:
        if self.gate is not None and self.gate.holding:  # readable first, then answered
            self._dispatch(self._target() if self.in_sync else None)
        if not self.in_sync:
            self._fail_waiters(Code.SLAVE_NOT_AVAILABLE)
            return
        target = self._target()
        waiters = self._waiters
        while waiters and waiters[0][0] <= target:
            waiter = heapq.heappop(waiters)[2]
            done = waiter[0]
            if done is not None:
                waiter[0] = None
                done(Code.OK)

    def _dispatch(self, upto: int | None) -> None:
        touched = self.store.confirm(upto)
        if touched and self.readable is not None:
            self.readable(touched)

    def _gate_follows(self) -> None:
        """The gate holds while this master runs with a slave in sync; opened, what it
        held goes to the queues (the master alone confirms, as RocketMQ's)."""
        gate = self.gate
        if gate is not None:
            gate.active = self._started and bool(self.in_sync)
            if not gate.active and gate.holding:
                self._dispatch(None)

    def _fail_waiters(self, code: Code) -> None:
        waiters, self._waiters = self._waiters, []
        self._deadlines.clear()
        for _e, _s, waiter in waiters:
            done = waiter[0]
            if done is not None:
                waiter[0] = None
                done(code)

    # -- lag ------------------------------------------------------------------------
    def lag(self, link: SlaveLink, now: float | None = None) -> tuple[int, float]:
        """(bytes, seconds) a slave is behind: the oldest append it has not acked.

        Behind every remembered append: as long as it has been linked."""
        now = self._clock() if now is None else now
        lag_bytes = max(0, self.store.commitlog.write_offset - link.acked)
        if not lag_bytes:
            return 0, 0.0
        if link.acked < self._marks.floor:
            return lag_bytes, now - link.connected_at
        since = self._marks.oldest_unacked(link.acked)
        return lag_bytes, 0.0 if since is None else max(0.0, now - since)

    # -- links ------------------------------------------------------------------------
    def link_factory(self) -> SlaveLink:
        """The HA server's protocol factory: one SlaveLink per connection."""
        return SlaveLink(self)

    def now(self) -> float:
        return self._clock()

    def wall_ms(self) -> int:
        return int(self._wall() * 1000)

    def epoch(self) -> int:
        return self._epoch()

    def commit_offset(self) -> int:  # what DATA frames say a raft majority holds: none
        return -1

    def configs_between(self, start: int, end: int) -> list:  # a raft group's members
        return []

    def is_master(self) -> bool:
        return self._is_master()

    def meta(self) -> dict:
        return self._meta()

    def meta_version(self) -> int:
        """Changes whenever the tables `meta` reads may have changed."""
        return self._meta_version()

    def welcome(self, link: SlaveLink, hello: dict) -> bool:
        """A slave's HELLO: start streaming to it (True), or refuse it or tell it to cut
        its log, and close (False)."""
        cl = self.store.commitlog
        refusal = None
        if not self._is_master():
            refusal = f"not the master of group {self.group}"
        elif hello.get("group") != self.group:
            refusal = f"slave of group {hello.get('group')!r} at the master of {self.group!r}"
        elif int(hello.get("segment_bytes", 0)) != cl.allocator.size:
            refusal = (f"segment size {hello.get('segment_bytes')} differs from the master's "
                       f"{cl.allocator.size}")
        elif int(hello.get("epoch", 0)) > self._epoch():
            refusal = f"slave knows epoch {hello.get('epoch')}, this master has {self._epoch()}"
        if refusal:
            self.counters["links_refused"] += 1
            link.refuse(wire.json_frame(wire.REFUSE, {"reason": refusal}))
            return False
        name, offset = str(hello.get("name")), int(hello.get("offset", 0))
        theirs = EpochHistory.from_list(hello.get("history", []))
        mine, end = self._history(), cl.write_offset
        agreed = consistent_end(theirs, offset, mine, end) if offset else 0
        if agreed < offset:
            self.counters["truncations_ordered"] += 1
            log.warning("slave %s of group %s must cut its log from %d to %d", name,
                        self.group, offset, agreed)
            link.refuse(wire.json_frame(wire.TRUNCATE, {"offset": agreed,
                                                        "epoch": self._epoch()}))
            return False
        if offset < cl.min_offset:
            link.refuse(wire.json_frame(wire.REFUSE, {
                "reason": f"slave at {offset} is below the master's oldest kept offset "
                          f"{cl.min_offset}: copy a recent store to it"}))
            return False
        old = self.links.get(name)
        if old is not None:
            old.close("the slave linked again")
        link.name = name
        self.links[name] = link
        self.acked[name] = offset
        link.start(offset, [wire.json_frame(wire.WELCOME, {
            "epoch": self._epoch(), "offset": offset, "history": mine.to_list()}),
            wire.json_frame(wire.META, self._meta())])
        log.info("slave linked group=%s slave=%s from offset=%d (master at %d)", self.group,
                 name, offset, end)
        self._isr_wake.set()
        link.kick()
        return True

    def on_ack(self, link: SlaveLink) -> None:
        """A slave acked up to `link.acked`."""
        self.acked[link.name] = link.acked
        self._release()
        if link.name not in self.in_sync:
            self._isr_wake.set()

    def dropped(self, link: SlaveLink) -> None:
        """A link closed (either side)."""
        if link.name and self.links.get(link.name) is link:
            del self.links[link.name]
            self._isr_wake.set()

    def close_links(self) -> None:
        """Stop streaming (this broker is no longer master); answer parked sends."""
        for link in list(self.links.values()):
            link.close()
        self._fail_waiters(Code.NOT_MASTER)

    # -- the in-sync set -------------------------------------------------------------
    def start(self, in_sync: frozenset[str] = frozenset()) -> None:
        """Begin (again) as master with the set the group record lists."""
        self.in_sync = set(in_sync)
        self._marks.reset(self.store.commitlog.write_offset)
        self._isr_gen += 1  # a loop of an earlier term that outlived its cancel exits
        if self._isr_task is not None:
            self._isr_task.cancel()
        self._isr_task = asyncio.ensure_future(self._isr_loop(self._isr_gen))
        self._isr_wake.set()
        self._started = True
        self._gate_follows()
        self._sweeper.cancel()
        self._sweeper.soon()

    def stop(self) -> None:
        # the flag, not only the cancel: a cancel that arrives as the event it waits on is
        # set may be swallowed
        self._isr_gen += 1
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        self._started = False
        self._gate_follows()  # a demoted master's queues hold its whole log (a cut follows)
        self._sweeper.cancel()
        self.close_links()

    def _desired(self) -> set[str]:
        now = self._clock()
        want = set()
        for name in self.in_sync | set(self.links):
            link = self.links.get(name)
            if link is None or not link.open:
                continue
            _b, lag_s = self.lag(link, now)
            if name in self.in_sync and lag_s < self.timeout_s:
                want.add(name)
            elif name not in self.in_sync and lag_s < JOIN_LAG_S and \
                    link.acked >= self._marks.floor:
                want.add(name)
        return want

    def _tick(self) -> float | None:
        """Time out old parked sends, forget old append marks, and wake the in-sync loop
        when the set should change (a slave's lag grows with time alone). Due again
        when the next parked send times out or an in-sync slave's oldest unacked append
        would reach the timeout; None when nothing is parked or unacked (20 sweeps a
        second were most of an idle master's wake-ups)."""
        if not self._started:
            return None
        self._sweep()
        self._marks.prune(min((lk.acked for lk in self.links.values()), default=None),
                          self.store.commitlog.write_offset)
        nxt = self._next_sweep()
        if self._desired() != self.in_sync:
            self._isr_wake.set()
            nxt = ISR_RETRY_S if nxt is None else min(nxt, ISR_RETRY_S)
        return nxt

    def _next_sweep(self) -> float | None:
        now = self._clock()
        due = [self._deadlines[0][0] - now] if self._deadlines else []
        for link in self.links.values():
            if link.open:
                lag_bytes, lag_s = self.lag(link, now)
                if lag_bytes:
                    due.append(self.timeout_s - lag_s if link.name in self.in_sync
                               else SWEEP_S * 20)  # catching up: its marks pruned meanwhile
        return max(SWEEP_S, min(due)) if due else None

    async def _isr_loop(self, gen: int) -> None:
        """Move the in-sync set towards the slaves that keep up, one change at a time."""
        while self._isr_gen == gen:
            await self._isr_wake.wait()
            self._isr_wake.clear()
            if self._isr_gen != gen:
                return
            want = self._desired()
            for name in sorted(want - self.in_sync):
                self.in_sync.add(name)  # stricter first, then recorded
                self._gate_follows()
                saved = await self._save(frozenset(self.in_sync))
                if self._isr_gen != gen:
                    return  # demoted meanwhile: a new term has its own set
                if not saved:
                    self.in_sync.discard(name)
                    self._gate_follows()
            for name in sorted(self.in_sync - want):
                saved = await self._save(frozenset(self.in_sync - {name}))
                if self._isr_gen != gen:
                    return
                if saved:  # recorded first, then looser
                    self.in_sync.discard(name)
                    self._gate_follows()
                    log.warning("slave left the in-sync set group=%s slave=%s", self.group,
                                name)
            self._release()

    async def _save(self, in_sync: frozenset[str]) -> bool:
        if self._persist is None:
            ok = True
        else:
            try:
                ok = await self._persist(in_sync)
            except Exception:  # noqa: BLE001 - ZooKeeper away: keep the stricter set
                log.exception("could not record the in-sync set of group %s", self.group)
                ok = False
        if ok:
            self.counters["isr_changes"] += 1
        elif self._started:  # looked at again: the set still differs from what is wanted
            self._sweeper.after(ISR_RETRY_S)
        return ok
