"""The broker: request dispatch over the store, on one asyncio event loop.

Everything here runs on the loop thread. Writes go through the write path
(`server.write_path`: admission, drill faults, the flush wait); what the
broker reports about itself is one snapshot per tick (`observe.snapshot`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from time import perf_counter

from broker_core import protocol as p
from broker_core.observe.backlog import BacklogEvaluator
from broker_core.observe.loop_lag import LoopLag
from broker_core.observe.queue_heat import QueueHeat
from broker_core.observe.recorder import OpRecorder
from broker_core.observe.snapshot import (
    BrokerSnapshot,
    consumers_report,
    hottest_report,
    take_snapshot,
)
from broker_core.observe.stats_doc import stats_document
from broker_core.observe.stats_json import StatsJson
from broker_core.protocol import Code, Op
from broker_core.protocol.idempotence import split_id
from broker_core.protocol.record import pack_host
from broker_core.protocol.system_topics import check_group
from broker_core.server import acl_ops, control_ops, lookup_ops, tx_ops
from broker_core.server.access import Access
from broker_core.server.acl_table import AclTable
from broker_core.server.aside_delivery import commit_half, deliver_due
from broker_core.server.config import BrokerConfig
from broker_core.server.delay_service import DelayOffsets, DelayService
from broker_core.server.faults import Faults
from broker_core.server.flow_control import FlowControl
from broker_core.server.group_state import BroadcastProgress, GroupMembers, OffsetTable
from broker_core.server.multi_ops import send_multi
from broker_core.server.pull_ops import PullOps
from broker_core.server.queue_locks import QueueLocks
from broker_core.server.send_ops import SendOps
from broker_core.server.topic_table import BROKER_OWN, TopicError, TopicTable, broker_own
from broker_core.server.trace_store import StoreTracer
from broker_core.server.transactions import TxService
from broker_core.server.tx_table import TxTable
from broker_core.server.write_path import WritePath
from broker_core.store import MessageStore, StoreConfig
from heatmap.metrics_log import BROKER_OPS
from heatmap.sla import HISTORY_S

__all__ = ["Broker", "BrokerConfig"]


OPS = BROKER_OPS


class Broker:
    pops = None  # grpc_front.pop.Pops while a gRPC front end serves (replicated as a table)

    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """`clock`: wall time (store timestamps, figures); `monotonic`: intervals (group
        members' heartbeats, the backlog's judgement, drill faults' durations)."""
        self.config = config
        self.clock = clock
        data = Path(config.data_dir)
        data.mkdir(parents=True, exist_ok=True)
        self.store = MessageStore(
            data / "store",
            StoreConfig(
                flush=config.flush,
                commitlog_segment_bytes=config.segment_bytes,
                store_host=config.addr,
                # the broker times sends and pulls itself: the store times only its flushes
                timed_ops=("flush",),
                **config.store_extra,
            ),
        )
        self.topics = TopicTable(
            data / "topics.json", config.default_queues, config.auto_create_topics
        )
        self.topics.recover(self.store.queues())
        self.offsets = OffsetTable(data / "offsets.json")
        self.delay_offsets = DelayOffsets(data / "delay_offsets.json")
        self.delay = DelayService(self.store, self.delay_offsets,
                                  lambda t, q, m: deliver_due(self, t, q, m),
                                  lambda: int(self.clock() * 1000))
        self.tx_table = TxTable(data / "transactions.json")
        self.locks = QueueLocks(monotonic, clock)
        self.tx = TxService(self.store, self.tx_table,
                            lambda t, q, m: commit_half(self, t, q, m),
                            lambda: int(self.clock() * 1000), config.tx_check_s,
                            config.tx_check_s, self.offsets, self.locks)
        self.flow = FlowControl(data / "quotas.json")
        self.acl = AclTable(data / "acl.json")
        if config.acl_admin is not None and not self.acl.users:
            self.acl.bootstrap(config.acl_admin)
        self.access = Access(self.acl, config.acl)
        # TLS (acl.tls): the data and HA ports' context, the HTTP port's (never asking
        # for a client certificate: Prometheus scrapes it), a slave's towards its master
        self.tls = self.tls_http = self.tls_peer = None
        if config.tls_cert is not None:
            from broker_core.acl import tls

            self.tls = tls.server_context(config.tls_cert, config.tls_key, config.tls_ca,
                                          config.tls_verify_clients)
            self.tls_http = tls.server_context(config.tls_cert, config.tls_key)
            if config.tls_ca is not None:
                self.tls_peer = tls.context_for(config.tls_ca, config.tls_cert,
                                                config.tls_key)
        self.members = GroupMembers(monotonic)
        self.broadcast = BroadcastProgress(monotonic)
        self.backlog = BacklogEvaluator(monotonic)
        self.heat = QueueHeat(monotonic)
        self.recorder = OpRecorder(OPS, clock)
        self._stats_json = StatsJson()  # /stats: each closed second encoded once
        self.faults = Faults(monotonic)
        self.write_path = WritePath(self.store, self.faults, config.flush == "sync",
                                    config.busy_after_ms, config.max_inflight_writes,
                                    self._paused)
        self.loop_lag = LoopLag()
        # server.housekeeping.Housekeeping once serving (the runner's): the tick and the
        # timed passes, woken by work; tests tick by hand without one
        self.housekeeping = None
        self.activity = 0  # reads served, in all
        self.ha = None  # an ha.node.HaNode when the broker is in a replicated group
        self._host = pack_host(config.addr)  # in SEND answers: the message id's broker
        self.trace_store = StoreTracer(
            self.store, config.name, config.addr, config.flush,
            lambda: "none" if self.ha is None else config.replication,
            lambda end: self.ha.appended(end) if self.ha is not None else None,
            lambda: self.write_refusal() is None)
        self.started = clock()
        self.serving = False
        self.latest: BrokerSnapshot | None = None  # taken each tick (runner) or on demand
        self._rr: dict[str, int] = {}  # topic -> the queue its last send without one took
        self.sends = SendOps(self, self._host)
        self.pulls = PullOps(self, clock=monotonic)
        self.connections: set = set()  # BrokerProtocol instances (server.tcp)
        self.counters = {"send_errors": 0, "bad_requests": 0, "connections": 0,
                         "connections_closed_bad": 0}

    # -- what wakes the periodic work (server.housekeeping) ---------------------------
    def woke(self) -> None:
        """Work arrived (any read, an operator's change): the tick runs while there is some."""
        self.activity += 1
        self.loop_lag.poke()
        hk = self.housekeeping
        if hk is not None and hk.idle:
            hk.wake()

    def aside(self, level: int) -> None:
        """A send was kept aside: delayed at `level`, or a transaction's half (0)."""
        if self.housekeeping is not None:
            self.housekeeping.aside(level)

    def partial_frame(self) -> None:
        """A client's read ended inside a frame (it is disconnected if it stays so)."""
        if self.housekeeping is not None:
            self.housekeeping.partial()

    def meta_version(self) -> int:
        """Moves whenever a table a master sends its slaves changed (ha META)."""
        tables = (self.topics, self.offsets, self.delay_offsets, self.tx_table, self.acl,
                  self.locks, *((self.pops,) if self.pops is not None else ()))
        return sum(t.version for t in tables)

    def role_changed(self) -> None:
        """Became master (or stopped being one): the passes look again, and the
        idempotent sends it holds are read from its CommitLog again."""
        self.sends.idempotent.seqs.mark_stale()
        if self.housekeeping is not None:
            self.housekeeping.role_changed()

    # -- dispatch -------------------------------------------------------------
    async def handle(self, header: p.Header, body: bytes) -> tuple[int, bytes]:
        """Answer one request; never raises (errors become codes)."""
        handler = self._handlers.get(header.op)
        if handler is None:
            return self.bad(f"unknown op {header.op}")
        try:
            if header.flags & p.FLAG_IDEMPOTENT:  # a SEND or SEND_MULTI with its producer id
                ident, body = split_id(header.op, body, header.flags)
                return await handler(self, body, ident)
            return await handler(self, body)
        except p.ProtocolError as exc:
            return self.bad(str(exc))
        except (TopicError, ValueError) as exc:
            return self.bad(str(exc))

    def bad(self, message: str) -> tuple[int, bytes]:
        self.counters["bad_requests"] += 1
        return Code.BAD_REQUEST, message.encode()

    async def _paused(self) -> None:
        left = self.faults.pause_left()
        if left:
            await asyncio.sleep(left)

    # -- writes and reads: send_ops and pull_ops; these adapt them to `handle` --------
    def check_send(self, topic: str, qid: int, nbytes: int, group: str, n: int = 1
                   ) -> tuple[int, object]:
        """(OK, queue id) or an error answer, before anything is written."""
        if (refused := self.write_refusal()) is not None:
            return refused
        limit = self.store.config.max_message_bytes
        if nbytes > limit:
            return Code.MESSAGE_TOO_LARGE, (f"body of {nbytes} bytes is over the "
                                            f"{limit}-byte limit").encode()
        queues = self.topics.get(topic, create=True)
        if queues is None:
            if topic in BROKER_OWN:
                return Code.NO_PERMISSION, broker_own(topic).encode()
            return Code.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist".encode()
        if (refusal := self.topics.write_refusal(topic, self.config.name)) is not None:
            return Code.NO_PERMISSION, refusal.encode()
        if qid < 0:  # round robin per topic: one counter for all made a client that
            # cycles through topics land each topic on one queue, always the same
            rr = self._rr
            qid = rr[topic] = (rr.get(topic, -1) + 1) % queues
        elif qid >= queues:
            return self.bad(f"queue {qid} out of range: {topic} has {queues}")
        if self.flow.quotas:  # last: only a send that would be stored takes tokens
            wait = self.flow.admit(topic, group, n)
            if wait:
                return Code.FLOW_CONTROL, p.encode_flow_control(wait, self.flow.reason())
        return Code.OK, qid

    async def _answer_of(self, op: int, start) -> tuple[int, bytes]:
        """(code, body) of a SEND, SEND_BATCH or PULL answered through its ops."""
        fut = asyncio.get_running_loop().create_future()
        frame = start(lambda out: fut.done() or fut.set_result(out))
        if frame is None:
            frame = await fut
        if isinstance(frame, list):
            frame = b"".join(frame)
        header = p.decode_header(frame)
        return header.code, frame[p.HEADER_SIZE:]

    async def _send(self, body: bytes, ident=None) -> tuple[int, bytes]:
        return await self._answer_of(Op.SEND, lambda reply: self.sends.send(
            0, body, perf_counter(), reply, ident))

    async def _send_batch(self, body: bytes) -> tuple[int, bytes]:
        return await self._answer_of(Op.SEND_BATCH, lambda reply: self.sends.send_batch(
            0, body, perf_counter(), reply))

    async def _send_multi(self, body: bytes, ident=None) -> tuple[int, bytes]:
        return await self._answer_of(Op.SEND_MULTI, lambda reply: send_multi(
            self.sends, 0, body, perf_counter(), reply, ident))

    async def _pull(self, body: bytes) -> tuple[int, bytes]:
        return await self._answer_of(Op.PULL, lambda reply: self.pulls.pull(
            0, body, perf_counter(), reply))

    # -- offsets committed (COMMIT_OFFSET, or riding a PULL) ----------------------
    def committed(self, group: str, topic: str, offsets: list[tuple[int, int]],
                  reset: int) -> bool:
        """A group's offsets (COMMIT_OFFSET, or riding a PULL); False when they come from
        before an operator's reset the consumer has not heard of (nothing stored)."""
        check_group(group)
        stored = all([self.offsets.commit(group, topic, qid, offset, reset)
                      for qid, offset in offsets])
        self.backlog.heard(group)
        return stored

    _handlers = {
        Op.SEND: _send,
        Op.SEND_BATCH: _send_batch,
        Op.SEND_MULTI: _send_multi,
        Op.PULL: _pull,
        Op.ROUTE: control_ops.route,
        Op.QUERY_OFFSET: control_ops.query_offset,
        Op.COMMIT_OFFSET: control_ops.commit_offset,
        Op.HEARTBEAT: control_ops.heartbeat,
        Op.STATS: control_ops.stats,
        Op.HA_STATE: control_ops.ha_state,
        Op.STEP_ASIDE: control_ops.step_aside,
        Op.QUERY_BY_KEY: lookup_ops.query_by_key,
        Op.VIEW_BY_ID: lookup_ops.view_by_id,
        Op.QUERY_BY_TIME: lookup_ops.query_by_time,
        Op.LOCK_BATCH: control_ops.lock_batch,
        Op.UNLOCK_BATCH: control_ops.unlock_batch,
        Op.END_TRANSACTION: tx_ops.end_transaction,
        Op.CHECK_TRANSACTION: tx_ops.check_transaction,
        Op.LIST_TRANSACTIONS: tx_ops.list_transactions,
        Op.ACL: acl_ops.acl,
    }

    # -- housekeeping, once a second ---------------------------------------------
    def tick(self, final: bool = False):
        """Close finished seconds and take the tick's snapshot; returns the seconds
        closed (the metrics log writes them). The topic and offset tables are saved
        by `save_tables`, off the loop. `final` (stopping): the open second too."""
        closed = self.close_seconds(final)
        self.refresh()
        return closed

    def close_seconds(self, final: bool = False):
        """The tick's first half, cheap, run at the second's boundary so that each
        closed second holds its own requests: the seconds that ended (`final`: and
        the one under way)."""
        flush = self.store.take_latency().get("flush")
        if flush is not None and flush.hist.count:
            self.recorder.add("flush", flush)
        return self.recorder.roll(final)

    def refresh(self) -> None:
        """The tick's second half (~5 ms of a demo master's loop: the windows'
        percentiles, the backlog report, the hottest queues): consumer backlog, queue
        heat, trace records, the snapshot that /stats and the metrics log serve."""
        for _step in self.refresh_steps():
            pass

    def refresh_steps(self) -> Iterator[None]:
        """`refresh`, yielding between its steps so that the tick's event loop serves
        sends and pulls meanwhile (at 10,000 queues the whole held it 60 ms)."""
        committed = self.offsets.offsets
        if broadcast := self.broadcast.offsets():  # each instance judged as a group of its own
            committed = {**committed, **broadcast}
        queues = self.store.queue_table.queues  # (read directly: 10,000 queues a tick)
        yield from self.backlog.sample_steps(
            committed, lambda t, q: cq.max_offset if (cq := queues.get((t, q))) else 0)
        self.heat.tick()
        self.trace_store.flush()
        consumers = consumers_report(self)
        yield
        hottest = hottest_report(self)
        yield
        self.latest = take_snapshot(self, consumers, hottest)

    def save_tables(self) -> Callable[[], None] | None:
        """The writes of the topic and offset tables that changed, to run on a worker
        thread (group_state.JsonTable), or None."""
        docs = [(table, doc) for table in (self.topics, self.offsets, self.delay_offsets,
                self.tx_table, self.acl, *((self.pops.file,) if self.pops else ()))
                if (doc := table.take()) is not None]
        if not docs:
            return None

        def write() -> None:
            for table, doc in docs:
                table.write(doc)

        return write

    def write_refusal(self) -> tuple[int, bytes] | None:
        """Why this broker takes no write now (NOT_MASTER and who is), or None. A broker
        of a group writes nothing before its replication is attached: its data port opens
        first, and a send stored then would be on one copy, answered as if replicated,
        and cut if the broker turns out to be its group's slave (a fast restart)."""
        if self.ha is not None:
            return self.ha.refusal()
        if self.config.group:
            return Code.NOT_MASTER, (f"{self.config.name} is starting: its role in group "
                                     f"{self.config.group} is not known yet").encode()
        return None

    def role_name(self) -> str:
        """MASTER, SLAVE or NONE (outside any group, or no role yet)."""
        return self.ha.role.value if self.ha is not None else "NONE"

    # -- delayed messages (server.delay_service) ----------------------------------------
    def delivers_delayed(self) -> bool:
        """A broker outside any group, or its group's writable master."""
        return self.write_refusal() is None

    # -- figures ----------------------------------------------------------------
    def snapshot(self) -> BrokerSnapshot:
        """The tick's snapshot (taken now if no tick ran yet, or brought up to date if
        the broker was idle since its last)."""
        if self.housekeeping is not None:
            self.housekeeping.catch_up()
        if self.latest is None:
            self.latest = take_snapshot(self)
        return self.latest

    def consumer_lag(self) -> dict[str, int]:
        """group -> messages behind, as the tick's backlog sample found them."""
        return self.backlog.lag()

    def stats(self, history_s: int = HISTORY_S) -> dict:
        """The /stats document: the tick's snapshot with its last `history_s` seconds
        (and, in a replicated group, `ha`: role, epoch, in-sync set, lag per slave)."""
        return stats_document(self.snapshot(), history_s)

    def stats_json(self, history_s: int = HISTORY_S) -> bytes:
        """`stats` as the JSON /stats serves, each closed second encoded once."""
        return self._stats_json.document(self.snapshot(), history_s)

    def close(self) -> None:
        for table in (self.topics, self.offsets, *((self.pops.file,) if self.pops else ())):
            table.save()
        self.trace_store.flush(final=True)
        self.store.close()
