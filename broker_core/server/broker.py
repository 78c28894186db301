"""The broker: request dispatch over the store, on one asyncio event loop.

Everything here runs on the loop thread. Writes go through the write path
(`server.write_path`: admission, drill faults, the flush wait); what the
broker reports about itself is one snapshot per tick (`observe.snapshot`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter

from broker_core import protocol as p
from broker_core.observe.backlog import BacklogEvaluator
from broker_core.observe.loop_lag import LoopLag
from broker_core.observe.recorder import OpRecorder
from broker_core.observe.snapshot import BrokerSnapshot, take_snapshot
from broker_core.observe.stats_doc import stats_document
from broker_core.protocol import Code, Op
from broker_core.server import lookup_ops
from broker_core.server.config import BrokerConfig
from broker_core.server.faults import Faults
from broker_core.server.flow_control import FlowControl
from broker_core.server.group_state import GroupMembers, OffsetTable, TopicError, TopicTable
from broker_core.server.trace_store import StoreTracer
from broker_core.server.write_path import PUT_CODES, WritePath
from broker_core.store import GetStatus, MessageStore, PutStatus, StoreConfig
from broker_core.store.message import pack_host
from broker_core.trace.records import PROP_MSG_ID, PROP_TRACE

__all__ = ["Broker", "BrokerConfig"]

OPS = ("send", "pull", "flush")
# Not a send error: stored, and the group's lack of a slave is an alert of its own
_ANSWERED_OK = (Code.OK, Code.SLAVE_NOT_AVAILABLE)
_PULL_STATUS = {
    GetStatus.FOUND: "FOUND",
    GetStatus.NO_NEW_MSG: "NO_NEW_MSG",
    GetStatus.OFFSET_OVERFLOW: "OFFSET_OVERFLOW",
    GetStatus.OFFSET_TOO_SMALL: "OFFSET_TOO_SMALL",
    GetStatus.NO_MATCHED_MESSAGE: "NO_MATCHED_MSG",
}


class Broker:
    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.time) -> None:
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
        self.offsets = OffsetTable(data / "offsets.json")
        self.flow = FlowControl(data / "quotas.json")
        self.members = GroupMembers(time.monotonic)
        self.backlog = BacklogEvaluator(time.monotonic)
        self.recorder = OpRecorder(OPS, clock)
        self.faults = Faults(time.monotonic)
        self.write_path = WritePath(self.store, self.faults, config.flush == "sync",
                                    config.busy_after_ms, config.max_inflight_writes)
        self.loop_lag = LoopLag()
        self.ha = None  # an ha.node.HaNode when the broker is in a replicated group
        self._host = pack_host(config.addr)  # in SEND answers: the message id's broker
        self.trace_store = StoreTracer(
            self.store, config.name, config.addr, config.flush,
            lambda: "none" if self.ha is None else config.replication,
            lambda end: self.ha.appended(end) if self.ha is not None else None,
            lambda: self.ha is None or self.ha.refusal() is None)
        self.started = clock()
        self.serving = False
        self.latest: BrokerSnapshot | None = None  # taken each tick (runner) or on demand
        self._rr = itertools.count()
        self._waiters: dict[tuple[str, int], list[asyncio.Future]] = {}
        self.connections: set = set()  # BrokerProtocol instances (server.tcp)
        self.counters = {
            "send_errors": 0,
            "bad_requests": 0,
            "connections": 0,
            "connections_closed_bad": 0,
        }

    # -- dispatch -------------------------------------------------------------
    async def handle(self, header: p.Header, body: bytes) -> tuple[int, bytes]:
        """Answer one request; never raises (errors become codes)."""
        handler = self._handlers.get(header.op)
        if handler is None:
            return self._bad(f"unknown op {header.op}")
        try:
            return await handler(self, body)
        except p.ProtocolError as exc:
            return self._bad(str(exc))
        except (TopicError, ValueError) as exc:
            return self._bad(str(exc))

    def _bad(self, message: str) -> tuple[int, bytes]:
        self.counters["bad_requests"] += 1
        return Code.BAD_REQUEST, message.encode()

    async def _paused(self) -> None:
        left = self.faults.pause_left()
        if left:
            await asyncio.sleep(left)

    # -- writes ---------------------------------------------------------------
    def _queue_for(self, topic: str, queue_id: int) -> tuple[int | None, tuple[int, bytes] | None]:
        queues = self.topics.get(topic, create=True)
        if queues is None:
            return None, (Code.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist".encode())
        if queue_id < 0:
            queue_id = next(self._rr) % queues
        elif queue_id >= queues:
            return None, self._bad(f"queue {queue_id} out of range: {topic} has {queues}")
        return queue_id, None

    def _wake(self, topic: str, queue_id: int) -> None:
        for fut in self._waiters.pop((topic, queue_id), ()):
            if not fut.done():
                fut.set_result(None)

    def send_now(self, body: bytes) -> tuple[int, bytes] | asyncio.Future | None:
        """SEND answered without a task: the common case (async flush, no drill
        fault, nothing queued in the write path) needs no await at all; with sync
        replication the answer is parked on a future the slaves' acks complete
        (still no task, no timer). None: take the async path."""
        wp = self.write_path
        if not wp.direct and not wp.parkable:
            return None
        t0 = perf_counter()
        try:
            topic, qid, msg = p.decode_send(body)
            code, answer = self._check_send(topic, qid, len(msg.body), msg.properties)
        except (p.ProtocolError, TopicError, ValueError) as exc:
            return self._bad(str(exc))
        if code == Code.FLOW_CONTROL:
            return code, answer  # refused before any work: not a send the broker timed
        if code == Code.OK:
            qid = answer

            traced = PROP_TRACE in msg.properties

            def put():
                return self.store.put(topic, qid, msg.body, msg.tags or None, msg.keys or None,
                                      msg.properties or None, wait=False)

            if wp.direct:
                result = put()
                if self.ha is not None and result.status is PutStatus.PUT_OK:
                    self.ha.appended(result.end_offset)
                code, answer = self._send_answer(PUT_CODES[result.status], result, topic, qid,
                                                 traced=traced)
            else:
                outcome = wp.write_parked(put)
                if isinstance(outcome, asyncio.Future):
                    return self._answer_when(outcome, topic, qid, t0, len(msg.body), traced)
                code, answer = self._send_answer(*outcome, topic, qid, traced=traced)
        self.recorder.record("send", perf_counter() - t0, 1, len(msg.body), code in _ANSWERED_OK)
        return code, answer

    def _answer_when(self, parked: asyncio.Future, topic: str, qid: int, t0: float,
                     nbytes: int, traced: bool) -> asyncio.Future:
        answer = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            code, out = self._send_answer(*f.result(), topic, qid, traced=traced)
            self.recorder.record("send", perf_counter() - t0, 1, nbytes, code in _ANSWERED_OK)
            answer.set_result((code, out))

        parked.add_done_callback(done)
        return answer

    async def _send(self, body: bytes) -> tuple[int, bytes]:
        t0 = perf_counter()
        topic, qid, msg = p.decode_send(body)
        await self._paused()
        code, answer = self._check_send(topic, qid, len(msg.body), msg.properties)
        if code == Code.FLOW_CONTROL:
            return code, answer
        if code == Code.OK:
            qid = answer
            code, result = await self.write_path.write(
                lambda: self.store.put(topic, qid, msg.body, msg.tags or None, msg.keys or None,
                                       msg.properties or None, wait=False))
            code, answer = self._send_answer(code, result, topic, qid,
                                             traced=PROP_TRACE in msg.properties)
        self.recorder.record("send", perf_counter() - t0, 1, len(msg.body), code in _ANSWERED_OK)
        return code, answer

    def _check_send(self, topic: str, qid: int, nbytes: int, props: dict, n: int = 1
                    ) -> tuple[int, object]:
        """(OK, queue id) or an error answer, before anything is written."""
        if self.ha is not None and (refused := self.ha.refusal()) is not None:
            self.counters["send_errors"] += 1
            return refused
        limit = self.store.config.max_message_bytes
        if nbytes > limit:
            self.counters["send_errors"] += 1
            return Code.MESSAGE_TOO_LARGE, (f"body of {nbytes} bytes is over the "
                                            f"{limit}-byte limit").encode()
        qid, err = self._queue_for(topic, qid)
        if err:
            return err
        if self.flow.quotas:  # last: only a send that would be stored takes tokens
            group = props.get(p.PRODUCER_GROUP, "") if props else ""
            wait = self.flow.admit(topic, group, n)
            if wait:
                return Code.FLOW_CONTROL, p.encode_flow_control(wait, self.flow.reason())
        return Code.OK, qid

    def _send_answer(self, code: int, result, topic: str, qid: int, batch: bool = False,
                     traced: bool = False) -> tuple[int, bytes]:
        if isinstance(result, str):  # refused by the write path
            self.counters["send_errors"] += 1
            return code, result.encode()
        if result.status is not PutStatus.PUT_OK:
            self.counters["send_errors"] += 1
            return code, (result.reason or result.status.value).encode()
        self._wake(topic, qid)
        if batch:
            return code, p.encode_batch_response(qid, result.queue_offset, result.count)
        if traced:
            self.trace_store.add(result, topic, qid, code)
        return code, p.encode_send_response(qid, result.queue_offset, result.physical_offset,
                                            result.store_timestamp, self._host)

    async def _send_batch(self, body: bytes) -> tuple[int, bytes]:
        t0 = perf_counter()
        topic, qid, msgs = p.decode_send_batch(body)
        nbytes = sum(len(m.body) for m in msgs)
        code, answer = await self._send_batch_inner(topic, qid, msgs, nbytes)
        if code == Code.FLOW_CONTROL:
            return code, answer
        self.recorder.record("send", perf_counter() - t0, len(msgs), nbytes, code in _ANSWERED_OK)
        return code, answer

    async def _send_batch_inner(self, topic, qid, msgs, nbytes) -> tuple[int, bytes]:
        await self._paused()
        first = msgs[0]
        if any(m.tags != first.tags or m.keys != first.keys or m.properties != first.properties
               for m in msgs):
            return self._bad("a batch's messages must share tags, keys and properties")
        code, answer = self._check_send(topic, qid, nbytes, first.properties, len(msgs))
        if code != Code.OK:
            return code, answer
        qid = answer
        code, result = await self.write_path.write(lambda: self.store.put_batch(
            topic, qid, [m.body for m in msgs], first.tags or None, first.keys or None,
            first.properties or None, wait=False))
        return self._send_answer(code, result, topic, qid, batch=True)

    # -- reads ----------------------------------------------------------------
    async def _pull(self, body: bytes) -> tuple[int, bytes]:
        t0 = perf_counter()
        req = p.decode_pull(body)
        await self._paused()
        if self.topics.get(req.topic, create=False) is None:
            return Code.TOPIC_NOT_EXIST, f"topic {req.topic!r} does not exist".encode()
        deadline = time.monotonic() + req.timeout_ms / 1000
        while True:
            got = self.store.get(req.topic, req.queue_id, req.offset, req.max_msgs, req.tag or None)
            left = deadline - time.monotonic()
            if got.status is not GetStatus.NO_NEW_MSG or left <= 0:
                break
            fut = asyncio.get_running_loop().create_future()
            self._waiters.setdefault((req.topic, req.queue_id), []).append(fut)
            try:
                await asyncio.wait_for(fut, left)
            except TimeoutError:
                pass
        msgs = [
            p.PulledMessage(
                m.topic,
                m.queue_id,
                m.queue_offset,
                m.store_timestamp,
                m.body,
                m.tags or "",
                m.keys or "",
                # a traced message tells its consumer its id, for the delivery record
                {**m.properties, PROP_MSG_ID: m.msg_id} if PROP_TRACE in m.properties
                else m.properties,
            )
            for m in got.messages
        ]
        found = got.status is GetStatus.FOUND
        if found:
            self.recorder.record(
                "pull", perf_counter() - t0, len(msgs), sum(len(m.body) for m in msgs)
            )
        return (Code.OK if found else Code.PULL_NOT_FOUND), p.encode_pull_response(
            _PULL_STATUS[got.status], got.next_offset, got.min_offset, got.max_offset, msgs
        )

    # -- control --------------------------------------------------------------
    async def _route(self, body: bytes) -> tuple[int, bytes]:
        req = p.decode_json(body)
        topic = str(req.get("topic", ""))
        queues = self.topics.get(topic, create=bool(req.get("create")))
        if queues is None:
            return Code.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist".encode()
        return Code.OK, p.encode_json({"topic": topic, "queues": queues})

    async def _query_offset(self, body: bytes) -> tuple[int, bytes]:
        req = p.decode_json(body)
        group, topic, qid = str(req["group"]), str(req["topic"]), int(req["queue_id"])
        lo, hi = self.store.queue_offsets(topic, qid)
        return Code.OK, p.encode_json(
            {"offset": self.offsets.get(group, topic, qid), "min_offset": lo, "max_offset": hi}
        )

    async def _commit_offset(self, body: bytes) -> tuple[int, bytes]:
        req = p.decode_json(body)
        try:
            self.offsets.commit(
                str(req["group"]), str(req["topic"]), int(req["queue_id"]), int(req["offset"])
            )
        except KeyError as exc:
            return self._bad(f"missing field {exc}")
        self.backlog.heard(str(req["group"]))
        return Code.OK, b"{}"

    async def _heartbeat(self, body: bytes) -> tuple[int, bytes]:
        req = p.decode_json(body)
        group, topic = str(req.get("group", "")), str(req.get("topic", ""))
        if not req.get("leave"):
            self.backlog.heard(group)
        members = self.members.heartbeat(
            group, topic, str(req.get("client_id", "")), bool(req.get("leave"))
        )
        queues = self.topics.get(topic, create=False) or 0
        return Code.OK, p.encode_json({"members": members, "queues": queues})

    async def _stats(self, body: bytes) -> tuple[int, bytes]:
        history = int(p.decode_json(body).get("history", 0))
        return Code.OK, p.encode_json(self.stats(history))

    async def _ha_state(self, body: bytes) -> tuple[int, bytes]:
        cl = self.store.commitlog
        doc = {"name": self.config.name, "offset": cl.write_offset, "group": None,
               "pid": os.getpid()}
        if self.ha is not None:
            doc.update(self.ha.figures())
        return Code.OK, p.encode_json(doc)

    _handlers = {
        Op.SEND: _send,
        Op.SEND_BATCH: _send_batch,
        Op.PULL: _pull,
        Op.ROUTE: _route,
        Op.QUERY_OFFSET: _query_offset,
        Op.COMMIT_OFFSET: _commit_offset,
        Op.HEARTBEAT: _heartbeat,
        Op.STATS: _stats,
        Op.HA_STATE: _ha_state,
        Op.QUERY_BY_KEY: lookup_ops.query_by_key,
        Op.VIEW_BY_ID: lookup_ops.view_by_id,
        Op.QUERY_BY_TIME: lookup_ops.query_by_time,
    }

    # -- housekeeping, once a second ---------------------------------------------
    def tick(self):
        """Close finished seconds and take the tick's snapshot; returns the seconds
        closed (the metrics log writes them)."""
        flush = self.store.take_latency().get("flush")
        if flush is not None and flush.count:
            self.recorder.add_histogram("flush", flush)
        self.offsets.save()
        self.backlog.sample(self.offsets.offsets, lambda t, q: self.store.queue_offsets(t, q)[1])
        self.trace_store.flush()
        closed = self.recorder.roll()
        self.latest = take_snapshot(self)
        return closed

    # -- figures ----------------------------------------------------------------
    def snapshot(self) -> BrokerSnapshot:
        """The tick's snapshot (taken now if no tick ran yet)."""
        if self.latest is None:
            self.latest = take_snapshot(self)
        return self.latest

    def consumer_lag(self) -> dict[str, int]:
        lag: dict[str, int] = {}
        for (group, topic, qid), offset in self.offsets.offsets.items():
            _lo, hi = self.store.queue_offsets(topic, qid)
            lag[group] = lag.get(group, 0) + max(0, hi - offset)
        return lag

    def stats(self, history_s: int = 300) -> dict:
        """The /stats document: the tick's snapshot with its last `history_s` seconds
        (and, in a replicated group, `ha`: role, epoch, in-sync set, lag per slave)."""
        return stats_document(self.snapshot(), history_s)

    def close(self) -> None:
        self.offsets.save()
        self.trace_store.flush()
        self.store.close()
