"""Consume, transform, produce, exactly once within a broker group (Kafka's
read-process-write with sendOffsetsToTransaction; the Mogujie talk's "consume result
and checkpoint committed atomically").

    def enrich(m):                       # bytes, an OutMessage, a list of them, or None
        return m.body.upper()

    with Transform("billing", "orders", "orders-enriched", enrich, routes=routes) as t:
        t.run(stop)

Each input queue is read under its lock (client.orderly) and its offsets move only
with a transaction: the output of a batch of one queue goes to the same broker group
as half messages, then one END_TRANSACTION commits the halves and the group's new
offset together (server.tx_commits), or neither. A transform that lost its queue
(a rebalance, a lease run out, a failover) or whose range another holder committed
is fenced: its halves are rolled back and the queue is read again from the group's
offset. A failure of any kind does the same; halves left behind are rolled back by
the check-back (this group answers ROLLBACK: their input is read again anyway).

Promised: every input message's output is stored and visible exactly once, in the
input queue's order, for input and output in the same broker group. Not promised: a
message whose output goes to another group (use the output's own consumer to be
idempotent there), and side effects of `fn` (it runs again when a batch is retried).
Output of input queue q goes to queue q mod (the output topic's queues on that
broker): one key's order holds from input to output.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from broker_core.client.attempts import SendFailed
from broker_core.client.connection import BrokerUnavailable
from broker_core.client.consumer import Consumer
from broker_core.client.transaction import TransactionProducer
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json
from broker_core.protocol.codecs import OutMessage
from broker_core.protocol.record import Message
from broker_core.protocol.transactions import (
    PROP_CONSUMED_FROM,
    PROP_TX_HALF,
    Consumed,
    TxState,
    fingerprint,
)

log = logging.getLogger("floodgate.transform")

Queue = tuple[str, int]
Output = bytes | OutMessage | Iterable[bytes | OutMessage] | None


@dataclass
class _Attempt:
    """One queue's batch on its way to a commit."""

    queue: Queue
    begin: int  # the group's offset it read from
    end: int  # past its last message
    epoch: int  # of the queue's lock it read under
    count: int  # input messages
    last: str  # the last one's fingerprint (protocol.transactions)
    sent: list = field(default_factory=list)  # its halves' sends (Futures)
    answer: Future | None = None  # the END_TRANSACTION's
    failed: bool = False


@dataclass
class TransformCounters:
    committed: int = 0  # transactions committed
    consumed: int = 0  # input messages whose output was committed
    produced: int = 0  # output messages committed
    fenced: int = 0  # commits refused: the queue was no longer this transform's
    failed: int = 0  # commits that did not happen (a broker down, a timeout): read again


class Transform:
    """`fn(message) -> Output` for each input message of `source`, committed to `sink`
    with `group`'s offsets. `brokers`/`routes`/`credentials` as Consumer and Producer
    take them; `max_batch`: input messages of one queue per transaction."""

    def __init__(self, group: str, source: str, sink: str, fn: Callable[[Message], Output],
                 brokers=None, routes=None, client_id: str | None = None,
                 timeout: float = 3.0, credentials=None, max_batch: int = 64,
                 observe: Callable[[dict], None] | None = None, **producer_kw) -> None:
        """`observe(attempt)`: each commit tried, {queue, begin, end, halves (their message
        ids), outcome: committed | aborted (fenced or rolled back) | unknown}."""
        if source == sink:
            raise ValueError("a transform reads one topic and writes another: its output "
                             "would be read back as input")
        self.group, self.source, self.sink, self.fn = group, source, sink, fn
        self.max_batch, self.observe = max_batch, observe
        self.consumer = Consumer(group, source, brokers, client_id=client_id,
                                 timeout=timeout, routes=routes, retry=False,
                                 exactly_once=True, credentials=credentials)
        self.tx = TransactionProducer(group, brokers, check=lambda _m: TxState.ROLLBACK,
                                      routes=routes, timeout=timeout, end_oneway=False,
                                      credentials=credentials, **producer_kw)
        self.counters = TransformCounters()
        self._sink_queues: dict[str, int] = {}

    def step(self, timeout: float = 1.0) -> int:
        """One poll and a transaction for each queue it brought, all in flight together
        (the halves of every queue, then every END_TRANSACTION): input messages
        committed."""
        batches: dict[Queue, list[Message]] = {}
        c = self.consumer
        for m in c.poll(self.max_batch, timeout):
            queue = c.pulls.queue_of(m)
            if queue is not None:
                batches.setdefault(queue, []).append(m)
        attempts = [a for q, batch in batches.items() if (a := self._begin(q, batch))]
        for a in attempts:
            self._end(a)
        return sum(self._settle(a) for a in attempts)

    def run(self, stop, timeout: float = 1.0) -> None:
        """`step` until `stop` (an Event) is set; a broker's refusal of the consumer
        (its topic not readable yet, say) logged and tried again a second later."""
        while not stop.is_set():
            try:
                self.step(timeout)
            except (BrokerError, TimeoutError) as exc:
                log.warning("%s: %s", self.group, exc)
                stop.wait(1.0)

    def commit_batch(self, queue: Queue, batch: list[Message]) -> int:
        """One queue's batch (as `poll` handed it out) transformed and committed alone:
        input messages committed (0: fenced or failed, the queue read again)."""
        a = self._begin(queue, batch)
        if a is None:
            return 0
        self._end(a)
        return self._settle(a)

    def _begin(self, queue: Queue, batch: list[Message]) -> _Attempt | None:
        """The batch's output on its way as halves, or None (the queue read again)."""
        c = self.consumer
        begin, epoch = c.committed.get(queue), c.mode.leases.epochs.get(queue)
        if not c.mode.leases.valid(queue) or epoch is None or begin is None:
            self._again(queue)  # not ours now, or not where we think: read again
            return None
        a = _Attempt(queue, begin, batch[-1].queue_offset + 1, epoch, len(batch),
                     fingerprint(batch[-1]))
        try:
            self._send_halves(queue, batch, a.sent)
        except (SendFailed, BrokerUnavailable, BrokerError, TimeoutError) as exc:
            self._failed(a, exc)
            return None
        return a

    def _end(self, a: _Attempt) -> None:
        """The halves stored: the commit of them and the offsets, on its way."""
        if a.failed:
            return
        try:
            halves = [f.result().queue_offset for f in a.sent]
            consumed = Consumed(self.group, self.source, self.consumer.client_id,
                                {a.queue[1]: (a.begin, a.end, a.epoch, a.last)})
            a.answer = self.tx.producer.request_async(a.queue[0], Op.END_TRANSACTION,
                                                      encode_json({
                "halves": halves, "decision": TxState.COMMIT.value, "by": "producer",
                "group": self.group, "consumed": consumed.document()}))
        except (SendFailed, BrokerUnavailable, BrokerError) as exc:
            self._failed(a, exc)

    def _settle(self, a: _Attempt) -> int:
        """The commit's answer: input messages committed."""
        if a.failed:
            return 0
        try:
            code, body = a.answer.result(self.tx.producer.timeout)
        except (BrokerUnavailable, BrokerError, FutureTimeout) as exc:
            self.tx.producer.forget(a.queue[0], a.answer)
            self._failed(a, exc)
            return 0
        state = decode_json(body).get("state") if code == Code.OK else None
        self._observed(a, "committed" if state == "committed" else
                       "aborted" if code == Code.FENCED or state == "rolled-back" else "unknown")
        if state == "committed":
            self.consumer.committed[a.queue] = a.end
            self.counters.committed += 1
            self.counters.consumed += a.count
            self.counters.produced += len(a.sent)
            return a.count
        if code == Code.FENCED:
            self.counters.fenced += 1
            log.info("%s: fenced on %s:%d: %s", self.group, self.source, a.queue[1],
                     body.decode("utf-8", "replace"))
        else:
            self.counters.failed += 1
        self._again(a.queue)
        return 0

    def _failed(self, a: _Attempt, exc: BaseException) -> None:
        """No answer to trust: the outcome is unknown, the queue read again."""
        log.info("%s: %s:%d from %d not committed (%s): read again", self.group,
                 self.source, a.queue[1], a.begin, exc)
        a.failed = True
        self.counters.failed += 1
        self._observed(a, "unknown")
        self._again(a.queue)

    def _observed(self, a: _Attempt, outcome: str) -> None:
        if self.observe is not None:
            self.observe({"queue": list(a.queue), "begin": a.begin, "end": a.end,
                          "outcome": outcome,
                          "halves": [f.result().msg_id for f in a.sent
                                     if f.done() and f.exception() is None]})

    def _again(self, queue: Queue) -> None:
        """Read `queue` again from the group's offset on its broker."""
        self.consumer.pulls.drop(queue)
        self.consumer.committed.pop(queue, None)

    def _send_halves(self, queue: Queue, batch: list[Message], futures: list) -> None:
        """The batch's output as half messages on the queue's broker, in input order:
        their sends into `futures`."""
        broker, qid = queue
        if broker not in self._sink_queues:
            self._sink_queues[broker] = max(1, self.tx.producer.queue_count(broker, self.sink))
        out_qid = qid % self._sink_queues[broker]
        for m in batch:
            where = f"{self.source}:{m.queue_id}:{m.queue_offset}"
            for out in _outputs(self.fn(m), m):
                props = {**out.properties, PROP_TX_HALF: "true", PROP_CONSUMED_FROM: where}
                futures.append(self.tx.producer.send_to(broker, self.sink, out_qid, OutMessage(
                    out.body, out.tags, out.keys, props)))

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.tx.close()

    def __enter__(self) -> Transform:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _outputs(out: Output, m: Message) -> list[OutMessage]:
    if out is None:
        return []
    if isinstance(out, bytes | OutMessage):
        out = [out]
    return [o if isinstance(o, OutMessage) else OutMessage(o, m.tags or "", m.keys or "")
            for o in out]
