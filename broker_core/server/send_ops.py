"""SEND and SEND_BATCH: decode, check, write, answer, record, once for both.

A paced send costs the broker tens of microseconds of Python on its loop thread,
and on a two-core host that is the budget of the whole cluster; so what repeats
is done once: each property set a producer sends is checked and encoded for the
record once (`PropertySet`, cached by its wire text), a stored send's answer frame
is one struct pack, and nothing is scheduled (no task, no future) unless the
answer must wait: for a sync flush, a drill fault's delay or the slaves' acks
(`WritePath.write` then calls back and the answer goes out through `reply`).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable
from time import perf_counter
from typing import NamedTuple, Protocol

from broker_core import protocol as p
from broker_core.errors import MessageIllegalError
from broker_core.observe.queue_heat import QueueHeat
from broker_core.observe.recorder import OpRecorder
from broker_core.protocol import BROKER_FAILURE_CODES, Code, Op
from broker_core.protocol.conditional import PROP_EXPECT_OFFSET, conflict_text, parse_expect
from broker_core.protocol.delay import (
    PROP_DELAY,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    SCHEDULE_TOPIC,
    parse_level,
)
from broker_core.protocol.idempotence import SendId, seq_field
from broker_core.protocol.record import (
    HEADER_SIZE,
    MAX_PROPERTIES_BYTES,
    PROP_KEYS,
    PROP_TAGS,
    encode_properties,
    tag_hash,
    topic_field,
)
from broker_core.protocol.transactions import HALF_TOPIC, PROP_CONSUMED_FROM, PROP_TX_HALF
from broker_core.server.idempotent_sends import IdempotentPuts
from broker_core.server.producer_seqs import DUPLICATE, ProducerSeqs
from broker_core.server.topic_table import TopicError
from broker_core.server.trace_store import StoreTracer
from broker_core.server.write_path import WritePath
from broker_core.store import MessageStore, PutResult, PutStatus
from broker_core.trace.records import PROP_TRACE

# Not a send error: stored, and the group's lack of a slave is an alert of its own
ANSWERED_OK = frozenset({Code.OK, Code.SLAVE_NOT_AVAILABLE})
MAX_PROPERTY_SETS = 1024  # cached; past that each set is checked per message

Reply = Callable[[bytes], None]


class PropertySet(NamedTuple):
    """What the broker needs of a message's properties, worked out once per set."""

    group: str  # the producer group (PGROUP): what quotas see
    traced: bool  # sampled by its producer for the trace
    raw: bytes  # the record's encoding of them (tags and keys go in front per message)
    error: str  # why they cannot be stored ("" when they can)
    delay: int = 0  # the delay level asked for (protocol.delay), 0 for none
    half: bool = False  # a transaction's half message (protocol.transactions)
    made_from: str = ""  # a transform's half: the input it was made of
    expect: int = -1  # a conditional send's queue offset (protocol.conditional), -1 none


def property_set(text: str) -> PropertySet:
    try:
        props = p.decode_props(text)
    except p.ProtocolError as exc:
        return PropertySet("", False, b"", str(exc))
    try:
        raw = encode_properties(None, None, props)
    except MessageIllegalError as exc:
        return PropertySet("", False, b"", str(exc))
    delay = 0
    if PROP_DELAY in props:
        try:
            delay = parse_level(props[PROP_DELAY])
        except ValueError as exc:
            return PropertySet("", False, b"", str(exc))
    half = props.get(PROP_TX_HALF) == "true"
    expect = -1
    if PROP_EXPECT_OFFSET in props:
        try:
            expect = parse_expect(props[PROP_EXPECT_OFFSET])
        except ValueError as exc:
            return PropertySet("", False, b"", str(exc))
        if half or delay:
            return PropertySet("", False, b"", "a conditional send (EXPECT_OFFSET) cannot be "
                               "delayed or transactional")
    if half and delay:
        return PropertySet("", False, b"", "a transactional message cannot be delayed")
    if half and not props.get(p.PRODUCER_GROUP):
        return PropertySet("", False, b"", "a half message names its producer group (PGROUP): "
                           "the broker asks that group back")
    return PropertySet(props.get(p.PRODUCER_GROUP, ""), PROP_TRACE in props, raw, "", delay,
                       half, props.get(PROP_CONSUMED_FROM, ""), expect)


def _field(name: str, value: str) -> str:
    if "\x01" in value or "\x02" in value:
        raise MessageIllegalError(f"{name.lower()} must not contain \\x01 or \\x02")
    return f"{name}\x01{value}\x02"


def prepare(topic: str, tags: str, keys: str, ps: PropertySet, data: bytes,
            extra: str = "") -> tuple:
    """One message as the store appends it (store.put_prepared): its record's size, the
    body's CRC, the body, the record's tail, the tag hash. MessageIllegalError when its
    properties cannot be stored."""
    if ps.error:
        raise MessageIllegalError(ps.error)
    raw = ps.raw
    if extra:
        raw += extra.encode()
    if tags or keys:
        head = (_field(PROP_TAGS, tags) if tags else "") + \
            (_field(PROP_KEYS, keys) if keys else "")
        raw = head.encode() + raw
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise MessageIllegalError(f"properties take {len(raw)} bytes, more than "
                                  f"{MAX_PROPERTIES_BYTES}")
    suffix = topic_field(topic) + len(raw).to_bytes(2, "big") + raw
    return (HEADER_SIZE + len(data) + len(suffix), zlib.crc32(data), data, suffix,
            tag_hash(tags) if tags else 0)


class Arrivals(Protocol):
    def arrived(self, topic: str, queue_id: int) -> None: ...


class SendContext(Protocol):
    """What the send ops need of their broker (server.broker.Broker is one)."""

    store: MessageStore
    write_path: WritePath
    recorder: OpRecorder
    trace_store: StoreTracer
    pulls: Arrivals  # held pulls woken by what was stored
    heat: QueueHeat  # messages stored per queue: the hot ones are named
    counters: dict[str, int]
    clock: Callable[[], float]  # wall time

    def bad(self, message: str) -> tuple[int, bytes]: ...
    def check_send(self, topic: str, qid: int, nbytes: int, group: str,
                   n: int = 1) -> tuple[int, object]: ...


class SendOps:
    def __init__(self, broker: SendContext, host: bytes) -> None:
        """`host`: the broker's packed address (store_host), in each SEND answer."""
        self.broker = broker
        self._sets: dict[str, PropertySet] = {}
        self.error_codes: Counter[str] = Counter()  # sends answered with an error, by code
        # the latest send the broker failed itself: {code, text, time} (what FAILING quotes),
        # and the latest it refused (the caller's input, a setting, a slave's NOT_MASTER)
        self.last_failure: dict[str, object] = {}
        self.last_refusal: dict[str, object] = {}
        self.host = host
        self._ip, self._port = host[:4], int.from_bytes(host[4:], "big", signed=True)
        self.idempotent = IdempotentPuts(broker.store, ProducerSeqs(broker.clock),
                                         lambda: int(broker.clock() * 1000))
        # what the store holds read back before the broker serves (a promotion: in a thread)
        self.idempotent.seqs.ensure(broker.store, int(broker.clock() * 1000))

    def _set(self, text: str) -> PropertySet:
        ps = self._sets.get(text)
        if ps is None:
            ps = property_set(text)
            if len(self._sets) < MAX_PROPERTY_SETS:
                self._sets[text] = ps
        return ps

    # -- SEND --------------------------------------------------------------------------
    def send(self, rid: int, body: bytes, received: float, reply: Reply,
             ident: SendId | None = None) -> bytes | None:
        """The answer frame, or None when it goes out later through `reply`. `ident`:
        an idempotent send's (producer id, sequence) (protocol.idempotence)."""
        b = self.broker
        try:
            topic, qid, tags, keys, text, data = p.decode_send_fields(body)
        except p.ProtocolError as exc:
            return self._refused(Op.SEND, rid, *b.bad(str(exc)))
        if ident is not None and (refused := self.idempotent.refusal(ident)) is not None:
            return self._failed(Op.SEND, rid, *refused, received)
        ps = self._set(text)
        try:
            code, checked = b.check_send(topic, qid, len(data), ps.group, 1)
        except (TopicError, ValueError) as exc:
            return self._refused(Op.SEND, rid, *b.bad(str(exc)))
        if code != Code.OK:
            return self._failed(Op.SEND, rid, code, checked, received)
        qid = checked
        try:
            stored_topic, stored_qid = topic, qid
            extra = ""
            if ps.delay or ps.half:  # kept aside until due (server.delay_service) or
                # committed (server.transactions)
                extra = _field(PROP_REAL_TOPIC, topic) + _field(PROP_REAL_QID, str(qid))
                stored_topic, stored_qid = ((SCHEDULE_TOPIC, ps.delay - 1) if ps.delay
                                            else (HALF_TOPIC, 0))
                b.aside(ps.delay)  # its pass looks when it is due (stored or not)
            if ident is not None:
                extra += seq_field(ident.pid, ident.seq)
            prepared = [prepare(stored_topic, tags, keys, ps, data, extra)]
        except MessageIllegalError as exc:
            return self._failed(Op.SEND, rid, Code.MESSAGE_ILLEGAL, str(exc).encode(), received)
        index_keys = keys.split() if keys else ()
        store = b.store

        def done(code: int, result) -> None:
            reply(self._answer(rid, code, result, topic, qid, len(data), ps.traced, received,
                               bool(ps.delay or ps.half)))

        def put():
            return store.put_prepared(stored_topic, stored_qid, prepared, index_keys)

        if ps.half:  # the pending set learns of it here, not by reading it back
            def put(put=put):
                result = put()
                if result.status is PutStatus.PUT_OK:
                    b.tx.stored_half(result, ps.group, topic, ps.made_from)
                return result

        if ps.expect >= 0:  # checked as it is put: nothing runs between (protocol.conditional)
            def put(put=put, expect=ps.expect):
                at = store.next_queue_offset(stored_topic, stored_qid)
                if at != expect:
                    return PutResult(PutStatus.CONFLICT, reason=conflict_text(
                        topic, qid, at, expect))
                return put()

        if ident is not None:  # (outside: a retry of a stored one is answered, not refused)
            put = self.idempotent.put(ident, [prepared[0][0]], put)
        out = b.write_path.write(put, done)
        if out is None:
            return None
        return self._answer(rid, out[0], out[1], topic, qid, len(data), ps.traced, received,
                            bool(ps.delay or ps.half))

    def _answer(self, rid: int, code: int, result, topic: str, qid: int, nbytes: int,
                traced: bool, received: float, delayed: bool = False) -> bytes:
        """The SEND answer (the queue the message is for, held aside or not; the offset
        where it is stored); a delayed message reaches its queue, and its consumers, when
        due, a half message when committed."""
        b = self.broker
        if isinstance(result, str):  # refused by the write path
            return self._failed(Op.SEND, rid, code, result.encode(), received)
        if result.status is not PutStatus.PUT_OK:
            return self._failed(Op.SEND, rid, code,
                                (result.reason or result.status.value).encode(), received)
        ok = code in ANSWERED_OK  # else stored short of a promise: a flush or slave timeout
        failure = not ok and self._count_error(code, b"")
        if result.reason == DUPLICATE:  # stored by its first try: answered as that was
            qid = self.idempotent.answered_queue(result)[0]
        else:
            if not delayed:
                b.pulls.arrived(topic, qid)
                b.heat.hit(topic, qid)
            if traced:
                b.trace_store.add(result, topic, qid, code)
        took = perf_counter() - received
        b.recorder.record("send", took, 1, nbytes, ok, failure)
        return p.send_answer_frame(rid, code, qid, result.queue_offset, result.physical_offset,
                                   result.store_timestamp, self._ip, self._port, took)

    def _failed(self, op: int, rid: int, code: int, text: bytes, received: float,
                sends: int = 1) -> bytes:
        """An answer of nothing stored (`sends` of them: a SEND_MULTI's); FLOW_CONTROL is
        refused before any work, is counted by flow control and is not a send the broker
        timed."""
        if code != Code.FLOW_CONTROL:
            failure = self._count_error(code, text, sends)
            self.broker.recorder.record("send", perf_counter() - received, 1, 0, False, failure,
                                        sends)
        return p.encode_answer(op, rid, code, text)

    def _count_error(self, code: int, text: bytes, sends: int = 1) -> bool:
        """Count a send answered with an error by its code, the latest failure and refusal
        kept with its text; True when the broker failed it itself
        (protocol.BROKER_FAILURE_CODES)."""
        b = self.broker
        b.counters["send_errors"] += sends
        name = Code(code).name
        self.error_codes[name] += sends
        latest = {"code": name, "text": text.decode("utf-8", "replace")[:200], "time": b.clock()}
        if code not in BROKER_FAILURE_CODES:
            self.last_refusal = latest
            return False
        self.last_failure = latest
        return True

    @staticmethod
    def _refused(op: int, rid: int, code: int, text: bytes) -> bytes:
        return p.encode_answer(op, rid, code, text)

    # -- SEND_BATCH ------------------------------------------------------------------------
    def send_batch(self, rid: int, body: bytes, received: float, reply: Reply) -> bytes | None:
        b = self.broker
        try:
            topic, qid, msgs = p.decode_send_batch(body)
            first = msgs[0]
            if any(m.tags != first.tags or m.keys != first.keys or
                   m.properties != first.properties for m in msgs):
                raise p.ProtocolError("a batch's messages must share tags, keys and properties")
            if PROP_DELAY in first.properties or PROP_TX_HALF in first.properties:
                raise p.ProtocolError("a batch cannot be delayed or transactional: send its "
                                      "messages one by one")
            nbytes = sum(len(m.body) for m in msgs)
            group = first.properties.get(p.PRODUCER_GROUP, "")
            code, checked = b.check_send(topic, qid, nbytes, group, len(msgs))
        except (p.ProtocolError, TopicError, ValueError) as exc:
            return self._refused(Op.SEND_BATCH, rid, *b.bad(str(exc)))
        if code != Code.OK:
            return self._failed(Op.SEND_BATCH, rid, code, checked, received)
        qid = checked
        store = b.store

        def put():
            return store.put_batch(topic, qid, [m.body for m in msgs], first.tags or None,
                                   first.keys or None, first.properties or None, wait=False)

        def answer(code: int, result) -> bytes:
            if isinstance(result, str) or result.status is not PutStatus.PUT_OK:
                text = result if isinstance(result, str) else \
                    (result.reason or result.status.value)
                return self._failed(Op.SEND_BATCH, rid, code, text.encode(), received)
            b.pulls.arrived(topic, qid)
            b.heat.hit(topic, qid, len(msgs))
            ok = code in ANSWERED_OK
            failure = not ok and self._count_error(code, b"")
            took = perf_counter() - received
            b.recorder.record("send", took, len(msgs), nbytes, ok, failure)
            return p.encode_answer(Op.SEND_BATCH, rid, code, p.with_service_time(
                p.encode_batch_response(qid, result.queue_offset, result.count), took))

        out = b.write_path.write(put, lambda code, result: reply(answer(code, result)))
        return None if out is None else answer(*out)
