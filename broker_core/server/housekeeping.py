"""The broker's periodic work, apart from its dispatch: each part runs when it is
due, and an idle broker wakes for none of it.

- The tick (the seconds closed at each boundary, the snapshot that /stats and the
  metrics log serve, the tables saved) runs every second while there is work: a
  read from a client or a slave's link wakes it (`Broker.woke`), and a second
  that passes with none is its last. /stats or /metrics asked of an idle broker
  closes the seconds since and takes the snapshot then (`catch_up`).
- Delayed delivery runs when the next delayed message is due; a message kept
  aside arms it (`aside`), and so does becoming master.
- Transactions' check-backs run when the next pending half is due a check.
- A client holding half a frame is disconnected when its time is up.
- Trace records held back (a RocketMQ client's delivery, kept for its acknowledgement)
  are written when their hold ends, ticking or not.
- The metrics log rolls when its rows are due (every `roll_s`), from the tick or,
  once the broker goes idle, from a deadline.

Idle means idle: 72 wake-ups a second (a loop-lag beat at 40/s, the delayed pass
at 20/s, replication sweeps and beats, the tick) were an idle broker's 8.75-11.5 ms
of CPU a second.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker_core.deadline import Deadline
from broker_core.observe.metrics_log import MetricsLogWriter
from broker_core.protocol import Code
from broker_core.protocol.delay import LEVELS_S
from broker_core.server import tx_ops
from broker_core.server.delay_service import MAX_PER_PASS
from broker_core.server.tcp import reap_slow_clients
from broker_core.server.transactions import TxState

log = logging.getLogger("floodgate.broker")

TICK_SPREAD_S = (0.1, 0.9)  # where in each second the tick's heavy half may run (tick_phase)
TICK_SLOTS = 11  # a prime: ports k apart (k < 11) take distinct slots
RETRY_S = 1.0  # a master cut off for now (ZooKeeper away) tries its passes again this soon


def tick_phase(port: int) -> float:
    """Seconds after each boundary this broker does the tick's heavy half. Brokers that
    share a host (make demo: 8 on 2 cores) all ticked at the boundary: ~10 ms of each
    loop at the same instant held every send on the host for 20-50 ms (the demo's
    fault-free masters read SLOW). Spread by the data port modulo a prime: up to
    TICK_SLOTS brokers a launcher starts (ports 1, 2 or 3 apart) each get a slot of
    their own; one broker a host (production) only takes its snapshot later in the second."""
    first, last = TICK_SPREAD_S
    return first + (port % TICK_SLOTS) / TICK_SLOTS * (last - first)


class Housekeeping:
    def __init__(self, broker, writer: MetricsLogWriter | None = None) -> None:
        self.broker, self.writer = broker, writer
        self.phase = tick_phase(broker.config.port)
        self._task: asyncio.Task | None = None
        self._rolling: asyncio.Future | None = None
        self._saving: asyncio.Future | None = None
        self._refreshed = -1  # the wall second the snapshot was last taken in
        self._version = -1  # the tables' version (Broker.meta_version) at that snapshot
        self.ticks = 0
        late = broker.loop_lag.sample
        self.delayed = Deadline(self._deliver_delayed, "delayed delivery", late)
        self.checks = Deadline(self._check_transactions, "transaction checks", late)
        self.reaper = Deadline(self._reap, "slow clients", late)
        self.roller = Deadline(self._roll_idle, "metrics log roll", late)
        self.traces = Deadline(self._flush_traces, "held trace records", late)
        self._deadlines = (self.delayed, self.checks, self.reaper, self.roller, self.traces)

    @property
    def idle(self) -> bool:
        return self._task is None

    def start(self) -> None:
        self.broker.housekeeping = self
        self.broker.trace_store.flush_after = self.traces.after
        self.broker.loop_lag.start()
        self.wake()
        self.role_changed()

    async def stop(self) -> None:
        """Cancel what is armed; the seconds closed so far reach the metrics log, and the
        one under way too (what a broker served just before it stopped is the log's)."""
        for deadline in self._deadlines:
            deadline.close()
        self.broker.loop_lag.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        closed = self.broker.tick(final=True)
        self._refreshed = int(self.broker.clock())
        if self.writer is not None:
            self.writer.add(self.broker.latest, closed)
            self.writer.roll()

    # -- what arms the parts -----------------------------------------------------------
    def wake(self) -> None:
        """Work arrived: the tick runs each second until a second passes with none. The
        seconds slept through are closed first: what this work records belongs to the
        second it happens in, not to the last one the tick closed."""
        if self._task is None:
            self.roller.cancel()
            self._log(self.broker.close_seconds())
            self._task = asyncio.ensure_future(self._ticking())

    def role_changed(self) -> None:
        """Master now (or again): delayed delivery and check-backs look at once."""
        self.delayed.soon()
        self.checks.soon()

    def aside(self, level: int) -> None:
        """A message was kept aside: delayed at `level`, or a transaction's half (0)."""
        if level:
            self.delayed.after(LEVELS_S[level - 1])
        else:
            self.checks.after(self.broker.tx.check_after_ms / 1000)

    def partial(self) -> None:
        """A client left half a frame: look again when its time is up."""
        self.reaper.after(self.broker.config.frame_timeout_s)

    def catch_up(self) -> None:
        """/stats or /metrics of an idle broker: the seconds since its last tick closed
        and the snapshot taken now (a ticking broker's is at most a second old)."""
        now = int(self.broker.clock())
        if self._refreshed >= now or (self._task is not None and self._refreshed >= now - 1):
            return
        closed = self.broker.close_seconds()
        self._refresh_now()
        self._log(closed)
        self._arm_roll()

    # -- the tick ---------------------------------------------------------------------
    async def _ticking(self) -> None:
        """Each second while it had work: the seconds closed at the boundary, the
        snapshot at the broker's phase of the second, the tables saved, the log rolled.
        Work is what a second recorded (a send, a pull that brought messages, an error)
        or a table changed (a commit, a topic): a heartbeat or a pull held and answered
        empty wakes it for one look at a boundary, no snapshot."""
        broker = self.broker
        try:
            while True:
                await asyncio.sleep(1.0 - (time.time() % 1.0) + 0.001)  # past the boundary
                closed = broker.close_seconds()
                version = broker.meta_version()
                worked = (version != self._version or broker.latest is None
                          or any(fig.hist.count or fig.errors
                                 for second in closed for fig in second.ops.values()))
                if worked:
                    self._version = version
                    await self._refresh_in_phase(closed)
                else:
                    self._log(closed)
                self.ticks += 1
                self._save()
                self._roll(due_only=True)
                if not worked:  # a whole second with no work: idle
                    self._task = None
                    self._arm_roll()
                    return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - logged; the next work starts the tick again
            log.exception("broker tick")
            self._task = None

    async def _refresh_in_phase(self, closed) -> None:
        broker = self.broker
        refreshed = False
        try:
            await asyncio.sleep(self.phase)
            for _step in broker.refresh_steps():  # sends served between steps
                await asyncio.sleep(0)
            refreshed = True
            self._refreshed = int(broker.clock())
        finally:  # stopped in between: the seconds closed still reach the log
            if not refreshed:
                self._refresh_now()
            self._log(closed)

    def _refresh_now(self) -> None:
        self.broker.refresh()
        self._refreshed = int(self.broker.clock())

    def _log(self, closed) -> None:
        if closed and self.writer is not None:
            if self.broker.latest is None:  # the first seconds: their gauges taken now
                self._refresh_now()
            self.writer.add(self.broker.latest, closed)

    def _save(self) -> None:
        if self._saving is None or self._saving.done():
            save = self.broker.save_tables()
            if save is not None:
                self._saving = asyncio.get_running_loop().run_in_executor(None, save)

    def _roll(self, due_only: bool) -> None:
        w = self.writer
        if w is None or (due_only and not w.due(time.time())):
            return
        if self._rolling is None or self._rolling.done():
            # Off the loop: converting two minutes of rows, the Parquet write and two
            # fsyncs took 50 ms and more under load, and held every send meanwhile.
            taken = w.take()
            if any(taken):
                self._rolling = asyncio.get_running_loop().run_in_executor(None, w.roll, taken)

    def _arm_roll(self) -> None:
        """Idle with rows buffered: they are rolled when due, not at the next work."""
        w = self.writer
        if w is not None and w.first_ts is not None:
            self.roller.after(max(0.0, w.first_ts + w.roll_s - time.time()))

    def _roll_idle(self) -> None:
        self._save()
        self._roll(due_only=False)

    # -- the deadlines' jobs ------------------------------------------------------------
    def _deliver_delayed(self) -> float | None:
        broker = self.broker
        if not broker.delivers_delayed():  # a master cut off for now tries again; a
            return RETRY_S if broker.role_name() == "MASTER" else None  # slave when promoted
        moved = broker.delay.run_once()
        if moved:
            broker.woke()  # stored: the tick counts it, the tables are saved
        if moved >= MAX_PER_PASS:
            return 0.0  # the rest at the next turn of the loop
        due = broker.delay.next_due_ms()
        return None if due is None else (due - broker.delay.wall_ms()) / 1000

    def _check_transactions(self) -> float | None:
        broker = self.broker
        tx = broker.tx
        if broker.write_refusal() is not None:
            if tx.loaded:
                tx.unload()
            return RETRY_S if broker.role_name() == "MASTER" else None
        for offset in tx.run_once():
            asyncio.ensure_future(self._give_up(offset))
        if tx.table.dirty:
            broker.woke()
        due = tx.next_due_ms()
        return None if due is None else (due - tx.wall_ms()) / 1000

    async def _give_up(self, offset: int) -> None:
        broker = self.broker
        code, _answer = await tx_ops.resolve(broker, offset, TxState.ROLLBACK,
                                             "checks-exhausted")
        if code == Code.OK:
            log.warning("transaction %s:%d rolled back: no COMMIT or ROLLBACK after %d "
                        "check-backs", broker.config.name, offset, broker.tx.max_checks)

    def _reap(self) -> float | None:
        return reap_slow_clients(self.broker, time.monotonic())

    def _flush_traces(self) -> None:
        self.broker.trace_store.flush()  # (a source still holding some asks again)
