"""Pull consumer, clustering or broadcast (see broker_core/client.py for the producer).

Each member heartbeats every broker; the union of live members, sorted, and
the sorted list of (broker, queue) are split evenly (RocketMQ's averaging
allocation), so every queue has exactly one owner once heartbeats agree.
Offsets live on the brokers: `commit()` writes them, a new owner reads them.
Delivery is at-least-once: what was polled but not committed comes again
after a rebalance or a restart.

A broadcast consumer (RocketMQ's BROADCASTING) reads every queue of the topic, as
every other instance of its group does; its offsets are its own, kept in a file
it names (saved at most once a second and on close: a crash reads up to a second
again), and told to the brokers in its heartbeats only so that they can judge its
lag. A failed message is not retried there (there is no group to retry for, as in
RocketMQ): `consume` logs and counts it.

An orderly consumer (RocketMQ's MessageListenerOrderly) holds a lock on each
queue it consumes (client.orderly, on the queue's master), handles one queue's
messages one at a time in offset order, and retries a failed message in place:
its queue waits SUSPEND_S and the same message comes again, up to
`max_reconsume` times, then it goes to the dead-letter queue (no retry topic:
that would put it behind the messages that followed it).

Pulls are pipelined, as RocketMQ's push consumer keeps pulls outstanding: each
broker has one long-poll PULL in flight for all the queues this consumer owns
there (the broker holds it until messages arrive in one of them), answers are
read by the thread that polls (no reader thread), and what they bring waits in
a buffer (at most BUFFER_PER_QUEUE a queue before it is pulled again) until
`poll` hands it out. A pull's records are verified here (CRC), as the broker
serves them as stored.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

from broker_core.client.attempts import normalize_brokers
from broker_core.client.connection import BrokerUnavailable, ConnectionPool, serve_any
from broker_core.client.orderly import SUSPEND_S, QueueLeases
from broker_core.client.retry import (
    DLQ_PREFIX,
    MAX_RECONSUME,
    PROP_RETRY_TIMES,
    RETRY_PREFIX,
    as_first_sent,
    retry_topic,
    send_back,
)
from broker_core.errors import BrokerError
from broker_core.fsutil import write_json_atomic
from broker_core.protocol import (
    MAX_PULL_MSGS,
    Code,
    Op,
    ProtocolError,
    PullRequest,
    QueueState,
    decode_json,
    decode_pull_head,
    encode_json,
    encode_pull,
)
from broker_core.store.message import CorruptRecord, Message
from broker_core.store.served import decode_records

log = logging.getLogger("floodgate.consumer")

HEARTBEAT_S = 2.0
PULL_WAIT_MS = 2000  # how long a broker holds a pull on a caught-up queue
PULL_BATCH = 32  # messages a pull asks for, per queue it names (RocketMQ's pullBatchSize)
BUFFER_PER_QUEUE = 256  # messages fetched and not yet handed out, before a queue's next pull
DOWN_S = 1.0  # a broker that failed a pull is not asked again for this long (its slave is),
DOWN_MAX_S = 16.0  # doubling with each failure in a row up to this: one that cannot be
# reached (a partition) would otherwise cost a whole timeout every second
ANSWER_S = 0.02  # a poll that sent pulls waits at least this long for their answers
SAVE_OFFSETS_S = 1.0  # a broadcast instance writes its offsets file at most this often


def read_pull_answer(body: bytes) -> list[tuple[QueueState, list[Message], int]]:
    """A PULL answer, per queue it names: (its state, its messages verified and decoded,
    corrupt records skipped). ProtocolError or CorruptRecord when it cannot be read."""
    states, pos = decode_pull_head(body)
    out = []
    for state in states:
        msgs, corrupt, pos = decode_records(body, pos, state.count)
        out.append((state, msgs, corrupt))
    if pos != len(body):
        raise ProtocolError(f"{len(body) - pos} unexpected bytes after a pull's records")
    return out


def allocate(
    members: Sequence[str], queues: Sequence[tuple[str, int]], me: str
) -> list[tuple[str, int]]:
    """The queues `me` owns: contiguous even shares, the first ones one larger."""
    members, queues = sorted(members), sorted(queues)
    if me not in members or not queues:
        return []
    n, k = len(queues), len(members)
    i = members.index(me)
    size, extra = divmod(n, k)
    start = i * size + min(i, extra)
    return queues[start : start + size + (1 if i < extra else 0)]


class Consumer:
    """`routes` (a replicated cluster, e.g. `ha.routes.ZkRoutes`): queues are per group,
    read from the group's master, or from a slave while the master does not answer
    (offsets then live on that slave: they come from the master once a second).

    `trace_rate` (0..1, default off): the share of traced messages (those a producer
    sampled) whose delivery this consumer reports to the trace, with the time of the
    commit that covers it (broker_core.client.tracing.DeliveryTracer)."""

    def __init__(
        self,
        group: str,
        topic: str,
        brokers: Sequence[str] | Mapping[str, str] | str | None = None,
        client_id: str | None = None,
        timeout: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        routes=None,
        trace_rate: float = 0.0,
        trace=None,
        retry: bool = True,
        max_reconsume: int = MAX_RECONSUME,
        retry_delay: str | float | None = None,
        broadcast: bool = False,
        offsets_file: str | os.PathLike | None = None,
        orderly: bool = False,
        credentials=None,
    ) -> None:
        """`retry`: also read the group's retry topic (client.retry), where `nack` sends
        the messages a handler failed; `max_reconsume` tries before the dead-letter queue;
        `retry_delay`: one delay level for every retry (default: growing from 10 s).
        `broadcast`: read every queue, offsets kept in `offsets_file` (required).
        `orderly`: lock each queue, one message at a time, retried in place (above)."""
        if broadcast and orderly:
            raise ValueError("a consumer is broadcast or orderly, not both: an orderly queue "
                             "has one consumer in its group")
        if broadcast and offsets_file is None:
            raise ValueError("a broadcast consumer keeps its offsets in a file of its own: "
                             "give offsets_file")
        self.group, self.topic = group, topic
        self.broadcast = broadcast
        self.failed = 0  # broadcast: messages whose handler raised (not retried)
        self._offsets_file = Path(offsets_file) if offsets_file is not None else None
        self._saved: dict[tuple[str, int], int] = {}  # as the offsets file holds them
        self._save_at = 0.0
        self.routes = routes
        if routes is not None:
            brokers = {g: g for g in routes.groups}
        self.brokers = normalize_brokers(brokers)
        self.client_id = client_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.timeout = timeout
        self._clock = clock
        # with routes: one connection per broker address, whichever group member answers
        self.credentials = credentials  # acl.credentials (None: FLOODGATE_CREDENTIALS)
        self._pool = ConnectionPool({} if routes is not None else self.brokers, credentials)
        self._owned: list[tuple[str, int]] = []
        self._owned_by_broker: dict[str, list[tuple[str, int]]] = {}
        self._offsets: dict[tuple[str, int], int] = {}  # next offset to pull
        self._delivered: dict[tuple[str, int], int] = {}  # past the last one handed out
        self._committed: dict[tuple[str, int], int] = {}
        self._inflight: dict[str, tuple[str, Future, float]] = {}  # broker -> its pull
        self._turn = 0
        self._ready: deque[tuple[tuple[str, int], list[Message], int]] = deque()
        self._buffered: dict[tuple[str, int], int] = {}
        self._down: dict[str, float] = {}  # address -> not pulled from until then
        self._fails: dict[str, int] = {}  # address -> failures in a row
        self.corrupt = 0  # records that failed their CRC, skipped
        self._members: tuple[str, ...] = ()
        self._reset = 0  # the last operator's reset of the group's offsets heard of
        self.resets_seen = 0  # how many times this consumer started over for one
        self._next_heartbeat = 0.0
        self.tracer = self._own_trace = None
        if trace_rate > 0:
            from broker_core.client.producer import trace_dispatcher
            from broker_core.client.tracing import DeliveryTracer

            if trace is None:
                trace = self._own_trace = trace_dispatcher(
                    None if routes is not None else dict(self.brokers), routes,
                    credentials=credentials)
            self.tracer = DeliveryTracer(trace, trace_rate, group, self.client_id)
        self.max_reconsume = max_reconsume
        self.retry_delay = retry_delay
        self._sender = None  # a Producer, made by the first nack
        # (store host, queue id, physical offset) of each message handed out since the last
        # commit ->
        # its broker: a message whose send-back failed is read again from there
        self._origin: dict[tuple[bytes, int, int], str] = {}
        self._retry: Consumer | None = None
        if self._offsets_file is not None:
            self._saved = self._read_offsets_file()
            self._committed = dict(self._saved)
        self._leases = (QueueLeases(group, topic, self.client_id, self._json, clock)
                        if orderly else None)
        self._suspended: dict[tuple[str, int], float] = {}  # queue -> not handed out until
        self._attempts: dict[tuple[tuple[str, int], int], int] = {}  # (queue, offset) -> fails
        if (retry and not broadcast and not orderly
                and not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))):
            self._retry = Consumer(group, retry_topic(group), None if routes else brokers,
                                   self.client_id, timeout, clock, routes, retry=False,
                                   credentials=credentials)

    # -- plumbing -----------------------------------------------------------
    def _call(self, broker: str, op: Op, body: bytes, timeout: float | None = None):
        timeout = timeout if timeout is not None else self.timeout
        if self.routes is None:
            return self._call_at(broker, op, body, timeout)
        last: BrokerUnavailable | None = None
        now = self._clock()
        replicas = self.routes.replicas(broker)  # the master first, then its slaves
        up = [a for a in replicas if self._down.get(a, 0.0) <= now]
        for addr in up + [a for a in replicas if a not in up]:  # the down ones last
            self._pool.addrs.setdefault(addr, addr)
            try:
                answer = self._call_at(addr, op, body, timeout)
            except BrokerUnavailable as exc:
                last = exc
                self._mark_down(addr)
                continue
            self._fails.pop(addr, None)
            return answer
        raise last or BrokerUnavailable(f"group {broker}: no broker known")

    def _mark_down(self, addr: str) -> None:
        """Not asked again for DOWN_S, doubling with each failure in a row."""
        n = self._fails[addr] = self._fails.get(addr, 0) + 1
        self._down[addr] = self._clock() + min(DOWN_MAX_S, DOWN_S * 2 ** (n - 1))

    def _call_at(self, name: str, op: Op, body: bytes, timeout: float):
        try:
            return self._pool.get(name).call(op, body, timeout)
        except TimeoutError as exc:
            raise BrokerUnavailable(str(exc)) from None

    def _json(self, broker: str, op: Op, payload: dict) -> dict:
        code, body = self._call(broker, op, encode_json(payload))
        if code != Code.OK:
            raise BrokerError(f"{broker}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
        return decode_json(body)

    # -- membership ---------------------------------------------------------
    def heartbeat(self, leave: bool = False) -> None:
        """Tell every broker we are alive; rebalance when the member set changed."""
        members: set[str] = set()
        queues: list[tuple[str, int]] = []
        reset = self._reset
        for broker in self.brokers:
            beat = {"client_id": self.client_id, "group": self.group, "topic": self.topic,
                    "leave": leave}
            if self.broadcast:  # where this instance is, for the broker's view of its lag
                beat.update(broadcast=True, offsets={
                    str(q): o for (b, q), o in self._committed.items() if b == broker})
            try:
                answer = self._json(broker, Op.HEARTBEAT, beat)
            except (BrokerUnavailable, BrokerError):
                continue  # a broker that is down owns no queues we could pull anyway
            members.update(answer.get("members", []))
            queues.extend((broker, q) for q in range(int(answer.get("queues", 0))))
            reset = max(reset, int(answer.get("reset", 0)))
        self._heard_reset(reset)
        self._next_heartbeat = self._clock() + HEARTBEAT_S
        if leave:
            return
        members.add(self.client_id)
        owned = (sorted(queues) if self.broadcast
                 else allocate(sorted(members), queues, self.client_id))
        if owned != self._owned:
            self.commit()
            if self._leases is not None:  # committed first: the next holder starts there
                self._leases.release(set(self._owned) - set(owned))
            self._owned = owned
            self._owned_by_broker = {}
            for queue in owned:
                self._owned_by_broker.setdefault(queue[0], []).append(queue)
            self._forget_queues(owned)
        self._members = tuple(sorted(members))
        if self._leases is not None:
            self._relock()

    @property
    def locked(self) -> list[tuple[str, int]]:
        """An orderly consumer's queues whose locks it trusts now."""
        return sorted(self._leases.held()) if self._leases is not None else []

    def _relock(self) -> None:
        """Renew the owned queues' locks; a queue won or lost starts again from its
        committed offset (another holder may have moved it)."""
        gained, lost = self._leases.renew(self._owned)
        for queue in gained | lost:
            self._clear_queue(queue)
            for table in (self._offsets, self._delivered, self._committed):
                table.pop(queue, None)

    def _pullable(self, queue: tuple[str, int]) -> bool:
        if self._leases is None:
            return True
        return self._leases.valid(queue) and self._suspended.get(queue, 0.0) <= self._clock()

    def _clear_queue(self, queue: tuple[str, int]) -> None:
        """Drop what was fetched for `queue` and not handed out, and the pull in flight
        to its broker (its answer could bring the queue's messages from before)."""
        if any(q == queue for q, _m, _n in self._ready):
            self._ready = deque(e for e in self._ready if e[0] != queue)
        self._buffered.pop(queue, None)
        inflight = self._inflight.pop(queue[0], None)
        if inflight is not None:
            self._pool.get(inflight[0]).forget(inflight[1])

    @property
    def assignment(self) -> list[tuple[str, int]]:
        return list(self._owned)

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def _start_offset(self, queue: tuple[str, int]) -> int:
        broker, qid = queue
        if queue in self._saved:  # a broadcast instance's own offset
            self._delivered[queue] = self._saved[queue]
            return self._saved[queue]
        answer = self._json(
            broker, Op.QUERY_OFFSET, {"group": self.group, "topic": self.topic, "queue_id": qid}
        )
        # a broadcast instance new to a queue starts from its first message kept, as a
        # clustering group with no offset does (a group's offsets are not its own)
        offset = -1 if self.broadcast else int(answer.get("offset", -1))
        if offset < 0:  # no committed offset: consume from the first message kept
            offset = int(answer.get("min_offset", 0))
        self._committed[queue] = self._delivered[queue] = offset
        return offset

    # -- consuming ----------------------------------------------------------
    def poll(self, max_msgs: int = 32, timeout: float = 1.0) -> list[Message]:
        """Up to ``max_msgs`` messages from the owned queues, waiting up to ``timeout``
        (at least ANSWER_S for the answers to pulls it sent: poll(timeout=0) still
        returns what the brokers hold); then what is due again from the retry topic,
        shown with the topic it was first sent to."""
        msgs = self._poll(max_msgs, timeout)
        if self._retry is not None and len(msgs) < max_msgs:
            msgs += [as_first_sent(m) for m in self._retry._poll(max_msgs - len(msgs), 0.0)]
        return msgs

    def _fail_in_place(self, queue: tuple[str, int], message: Message) -> str:
        """Orderly: `message` comes again after SUSPEND_S ("retry"), or past
        `max_reconsume` tries goes to the dead-letter queue ("dlq") and its queue moves
        on. Raises SendFailed when the dead letter could not be sent (it is retried)."""
        key = (queue, message.queue_offset)
        fails = self._attempts.get(key, 0) + 1
        if fails > self.max_reconsume:
            spent = dataclasses.replace(message, properties={
                **(message.properties or {}), PROP_RETRY_TIMES: str(self.max_reconsume)})
            try:
                kind = send_back(self._sender_for_nacks(), self.group, spent, None,
                                 self.max_reconsume)
            except BrokerError:
                fails = self.max_reconsume  # tried again after the pause
            else:
                self._attempts.pop(key, None)
                return kind
        self._attempts[key] = fails
        self._clear_queue(queue)
        self._offsets[queue] = self._delivered[queue] = message.queue_offset
        self._suspended[queue] = self._clock() + SUSPEND_S
        return "retry"

    def _queue_of(self, message: Message) -> tuple[str, int] | None:
        broker = self._origin.get((message.store_host_raw, message.queue_id,
                                   message.physical_offset))
        return None if broker is None else (broker, message.queue_id)

    def nack(self, message: Message, delay: str | float | None = None) -> str:
        """The handler failed `message`: send it back for this group, to come again after
        a growing delay (or `delay`, a level), or to the dead-letter queue past
        `max_reconsume` tries: "retry" or "dlq". Raises SendFailed when it could not be
        sent; its queue is then read again from it (what followed comes again too)."""
        if self.broadcast:
            raise ValueError("a broadcast consumer does not send messages back: there is no "
                             "group to retry them for")
        if self._leases is not None:  # retried in place: its queue is read again from it
            queue = self._queue_of(message)
            if queue is None:
                raise ValueError(f"{message.msg_id} was not handed out by this consumer")
            return self._fail_in_place(queue, message)
        try:
            return send_back(self._sender_for_nacks(), self.group, message,
                             delay if delay is not None else self.retry_delay, self.max_reconsume)
        except Exception:
            # not sent back: read it again (and what followed it in its queue) rather than
            # commit past it; from the retry topic if that is where it came from
            if not self._rewind(message) and self._retry is not None:
                self._retry._rewind(message)
            raise

    def _sender_for_nacks(self):
        if self._sender is None:
            from broker_core.client.producer import Producer

            self._sender = Producer(None if self.routes is not None else dict(self.brokers),
                                    routes=self.routes, timeout=self.timeout,
                                    credentials=self.credentials)
        return self._sender

    def _rewind(self, message: Message) -> bool:
        """Hand `message` out again: its queue goes back to it (what followed it comes
        again too: at least once). False if this consumer did not hand it out."""
        broker = self._origin.get((message.store_host_raw, message.queue_id,
                                   message.physical_offset))
        if broker is None:
            return False
        queue = (broker, message.queue_id)
        if queue in self._delivered:
            self._delivered[queue] = min(self._delivered[queue], message.queue_offset)
        self._forget_queues(self._owned)  # fetched-ahead messages dropped, read again
        return True

    def consume(self, handler: Callable[[Message], object], max_msgs: int = 32,
                timeout: float = 1.0, stop=None) -> None:
        """Hand each message to `handler` until `stop` (an Event) is set; a message whose
        handler raises is sent back (`nack`); offsets are committed after each batch.
        Orderly: one queue's messages in order, a failure retried in place."""
        if self._leases is not None:
            return self._consume_orderly(handler, max_msgs, timeout, stop)
        while stop is None or not stop.is_set():
            # send-backs go out without holding up the batch; all are acknowledged (or the
            # message's queue rewound) before the commit that covers them
            backs = []
            for m in self.poll(max_msgs, timeout):
                try:
                    handler(m)
                except Exception:  # noqa: BLE001 - the handler's failure: retried later
                    if self.broadcast:  # not retried (RocketMQ's rule): said and counted
                        self.failed += 1
                        log.warning("%s: handler failed on %s (broadcast: not retried)",
                                    self.group, m.msg_id, exc_info=True)
                        continue
                    _kind, fut = send_back(
                        self._sender_for_nacks(), self.group, m, self.retry_delay,
                        self.max_reconsume, wait=False)
                    backs.append((m, fut))
            for m, fut in backs:
                try:
                    fut.result()
                except BrokerError as exc:  # not sent back: it comes again (rewound)
                    log.warning("%s: could not send %s back: %s", self.group, m.msg_id, exc)
                    if not self._rewind(m) and self._retry is not None:
                        self._retry._rewind(m)
            self.commit()

    def _consume_orderly(self, handler, max_msgs: int, timeout: float, stop) -> None:
        while stop is None or not stop.is_set():
            held_back: set[tuple[str, int]] = set()  # queues whose turn in this batch is over
            for m in self.poll(max_msgs, timeout):
                queue = self._queue_of(m)
                if queue is None or queue in held_back:
                    continue
                if not self._leases.valid(queue):  # lapsed meanwhile: another may hold it
                    self._clear_queue(queue)
                    for table in (self._offsets, self._delivered):
                        table.pop(queue, None)
                    held_back.add(queue)
                    continue
                try:
                    handler(m)
                except Exception:  # noqa: BLE001 - the handler's failure: retried in place
                    log.warning("%s: handler failed on %s (orderly: retried in place)",
                                self.group, m.msg_id, exc_info=True)
                    if self._fail_in_place(queue, m) == "retry":
                        held_back.add(queue)
                    continue
                self._attempts.pop((queue, m.queue_offset), None)
            self.commit()

    def _poll(self, max_msgs: int, timeout: float) -> list[Message]:
        deadline = self._clock() + timeout
        while True:
            if self._clock() >= self._next_heartbeat:
                self.heartbeat()
            elif (self._leases is not None and self._clock() >= self._leases.retry_at
                  and len(self._leases.held()) < len(self._owned)):
                self._relock()
            if self._fill():
                deadline = max(deadline, self._clock() + ANSWER_S)
            self._serve(0.0)
            if self._ready:
                return self._take(max_msgs)
            left = deadline - self._clock()
            if left <= 0:
                return []
            self._serve(min(left, 0.1))
            if self._ready:
                return self._take(max_msgs)

    def _serve(self, timeout: float) -> None:
        """Read the answers that arrive within `timeout`, and take them in."""
        if self._inflight:
            serve_any([self._pool.get(a) for a, _f, _t in self._inflight.values()], timeout)
            self._collect()
        elif timeout:
            time.sleep(min(timeout, 0.1))

    def _fill(self) -> bool:
        """A pull in flight on every broker where an owned queue has room in the buffer;
        whether any was sent."""
        sent = False
        for broker, owned in self._owned_by_broker.items():
            if broker in self._inflight:  # (checked first: a poll's loop asks often)
                continue
            queues = [q for q in owned
                      if self._buffered.get(q, 0) < BUFFER_PER_QUEUE and self._pullable(q)]
            if not queues:
                continue
            addr = self._pull_addr(broker)
            if addr is None:
                continue
            try:
                for queue in queues:
                    if queue not in self._offsets:
                        self._offsets[queue] = self._start_offset(queue)
                turn = self._turn = self._turn + 1  # rotate: no queue always last
                k = turn % len(queues)
                queues = queues[k:] + queues[:k]
                req = PullRequest(self.group, self.topic,
                                  [(q, self._offsets[(broker, q)]) for _b, q in queues],
                                  min(MAX_PULL_MSGS, PULL_BATCH * len(queues)), PULL_WAIT_MS)
                fut = self._pool.get(addr).request(Op.PULL, encode_pull(req), watched=True)
            except (BrokerUnavailable, BrokerError):
                self._mark_down(addr)
                continue
            self._inflight[broker] = (addr, fut, self._clock())
            sent = True
        return sent

    def _pull_addr(self, broker: str) -> str | None:
        """Where a queue of `broker` is pulled from: the broker, or with routes its
        group's master, or a slave while the master fails pulls."""
        if self.routes is None:
            return broker
        now = self._clock()
        for addr in self.routes.replicas(broker):  # the master first, then its slaves
            self._pool.addrs.setdefault(addr, addr)
            if self._down.get(addr, 0.0) <= now:
                return addr
        return None

    def _collect(self) -> None:
        """Take in the answers that arrived (and drop pulls that never will)."""
        now = self._clock()
        for broker, (addr, fut, sent) in list(self._inflight.items()):
            if not fut.done():
                if now - sent > self.timeout + PULL_WAIT_MS / 1000:
                    self._pool.get(addr).forget(fut)
                    del self._inflight[broker]
                    self._mark_down(addr)
                continue
            del self._inflight[broker]
            self._answered(broker, addr, fut)

    def _answered(self, broker: str, addr: str, fut: Future) -> None:
        try:
            code, body = fut.result()
        except BrokerUnavailable:
            self._mark_down(addr)
            return
        self._fails.pop(addr, None)  # it answered
        if code == Code.NO_PERMISSION:  # the topic not readable there: not asked for a while
            self._down[addr] = self._clock() + DOWN_S
            return
        if code not in (Code.OK, Code.PULL_NOT_FOUND):
            return  # refused (a topic not there yet): asked again next time
        try:
            queues = read_pull_answer(body)
        except (ProtocolError, CorruptRecord) as exc:
            log.warning("%s: bad pull answer for %s: %s", addr, self.topic, exc)
            self._down[addr] = self._clock() + DOWN_S
            return
        owned = set(self._owned)
        for state, msgs, corrupt in queues:
            queue = (broker, state.queue_id)
            if queue not in owned or state.status == "NOT_READ" or not self._pullable(queue):
                continue  # rebalanced away meanwhile, or not read this time
            if corrupt:
                self.corrupt += corrupt
                log.warning("%s: %d records of %s queue %d failed their CRC: skipped", addr,
                            corrupt, self.topic, state.queue_id)
            next_offset = state.next_offset
            if state.status == "OFFSET_TOO_SMALL":  # retention removed them: the oldest kept
                next_offset = max(next_offset, state.min_offset)
            self._offsets[queue] = next_offset
            if msgs:
                self._ready.append((queue, msgs, next_offset))
                self._buffered[queue] = self._buffered.get(queue, 0) + len(msgs)
            elif not self._buffered.get(queue):
                self._delivered[queue] = next_offset  # nothing in between: skipped ahead

    def _take(self, max_msgs: int) -> list[Message]:
        out: list[Message] = []
        while self._ready and len(out) < max_msgs:
            queue, msgs, next_offset = self._ready[0]
            if not self._pullable(queue):  # its lock lapsed, or it waits after a failure
                self._clear_queue(queue)
                if queue in self._delivered:
                    self._offsets[queue] = self._delivered[queue]
                continue
            room = max_msgs - len(out)
            part, rest = msgs[:room], msgs[room:]
            out.extend(part)
            self._buffered[queue] -= len(part)
            if rest:
                self._ready[0] = (queue, rest, next_offset)
                self._delivered[queue] = rest[0].queue_offset
            else:
                self._ready.popleft()
                self._delivered[queue] = next_offset
            if self.tracer is not None:
                self.tracer.polled(queue[0], part)
            origin = self._origin
            for m in part:
                origin[(m.store_host_raw, m.queue_id, m.physical_offset)] = queue[0]
        return out

    def _forget_queues(self, keep: list[tuple[str, int]]) -> None:
        """Rebalanced: what was fetched and not handed out is dropped (and fetched again
        from the offset past the last message handed out, if the queue stays ours)."""
        self._ready.clear()
        for addr, fut, _sent in self._inflight.values():
            self._pool.get(addr).forget(fut)
        self._inflight.clear()
        self._buffered.clear()
        self._offsets = {q: self._delivered[q] for q in keep if q in self._delivered}
        self._delivered = dict(self._offsets)

    def _heard_reset(self, reset: int) -> None:
        """An operator moved the group's offsets (`floodgate offsets reset`): what this
        consumer holds and where it was are dropped, and it starts again from the
        offsets the brokers have now (nothing of the old range is committed after)."""
        if reset <= self._reset:
            return
        started = bool(self._offsets or self._delivered)
        self._reset = reset
        if not started:
            return
        self.resets_seen += 1
        self._forget_queues([])
        self._committed.clear()
        if self.tracer is not None:
            self.tracer.release_all()

    def commit(self) -> None:
        """Store the offsets of everything polled so far on the brokers (a broadcast
        instance: in its offsets file, at most once a second)."""
        self._origin.clear()  # a message handed out before is past its nack now
        if self.broadcast:
            self._committed.update(self._delivered)
            if self._clock() >= self._save_at:
                self._save_offsets()
            return
        if self._retry is not None:
            self._retry.commit()
        for queue, offset in list(self._delivered.items()):
            if self._committed.get(queue) == offset:
                continue
            broker, qid = queue
            try:
                answer = self._json(
                    broker,
                    Op.COMMIT_OFFSET,
                    {"group": self.group, "topic": self.topic, "queue_id": qid, "offset": offset,
                     "reset": self._reset},
                )
                if answer.get("stale"):  # reset meanwhile: start over from the new offsets
                    self._heard_reset(int(answer.get("reset", 0)))
                    return
                self._committed[queue] = offset
                if self.tracer is not None:
                    self.tracer.committed(queue, offset)
            except (BrokerUnavailable, BrokerError):
                pass  # at-least-once: committed again next time

    # -- a broadcast instance's offsets file -----------------------------------------
    def _read_offsets_file(self) -> dict[tuple[str, int], int]:
        path = self._offsets_file
        if not path.exists():
            return {}
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("group") != self.group or doc.get("topic") != self.topic:
                raise ValueError(f"it holds group {doc.get('group')!r} topic "
                                 f"{doc.get('topic')!r}, not {self.group!r} {self.topic!r}")
            return {(str(b), int(q)): int(o) for b, queues in doc["offsets"].items()
                    for q, o in queues.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"offsets file {path}: unreadable ({exc})") from None

    def _save_offsets(self) -> None:
        self._save_at = self._clock() + SAVE_OFFSETS_S
        if self._committed == self._saved:
            return
        offsets: dict[str, dict[str, int]] = {}
        for (b, q), o in sorted(self._committed.items()):
            offsets.setdefault(b, {})[str(q)] = o
        try:
            self._offsets_file.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self._offsets_file, {"group": self.group, "topic": self.topic,
                                                   "client_id": self.client_id,
                                                   "offsets": offsets})
        except OSError as exc:  # at least once: read again from the last saved offsets
            log.warning("%s: offsets not saved to %s: %s", self.group, self._offsets_file, exc)
            return
        self._saved = dict(self._committed)

    def close(self) -> None:
        try:
            if self._retry is not None:
                self._retry.close()
            self.commit()
            if self._leases is not None:
                self._leases.release(self._owned)
            if self.broadcast:
                self._save_offsets()
            self.heartbeat(leave=True)
        finally:
            self._pool.close()
            if self._sender is not None:
                self._sender.close()
            if self.tracer is not None:
                self.tracer.release_all()
            if self._own_trace is not None:
                self._own_trace.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
