"""SEND_MULTI on the broker (protocol.multi): a producer's messages of one turn of its
loop, one topic and queue, admitted, stored, replicated and answered as one request.

Each message is checked and encoded as a SEND's is (`send_ops.prepare`, its property
set cached); then one admission (flow control counts every message), one append of
them all (all or none), one wait for the slaves, one answer with each message's
offsets, and one latency sample for the request. Delayed and transactional messages
go one by one (SEND): each is kept aside apart.
"""

from __future__ import annotations

from time import perf_counter

from broker_core import protocol as p
from broker_core.errors import MessageIllegalError
from broker_core.protocol import Code, Op
from broker_core.protocol.idempotence import MAX_SEQ, SendId, seq_field
from broker_core.protocol.multi import decode_multi, encode_multi_answer
from broker_core.server.producer_seqs import DUPLICATE
from broker_core.server.send_ops import ANSWERED_OK, Reply, SendOps, prepare
from broker_core.server.topic_table import TopicError
from broker_core.store import PutStatus


def send_multi(ops: SendOps, rid: int, body: bytes, received: float,
               reply: Reply, ident: SendId | None = None) -> bytes | None:
    """The answer frame, or None when it goes out later through `reply`. `ident`: an
    idempotent frame's (producer id, first sequence): message i takes sequence + i."""
    b = ops.broker
    try:
        topic, qid, msgs = decode_multi(body)
    except p.ProtocolError as exc:
        return ops._refused(Op.SEND_MULTI, rid, *b.bad(str(exc)))
    n = len(msgs)
    if ident is not None:
        if ident[1] + n - 1 > MAX_SEQ:
            return ops._refused(Op.SEND_MULTI, rid, *b.bad("sequence past 2^32 - 1"))
        if (refused := ops.idempotent.refusal(ident)) is not None:
            return ops._failed(Op.SEND_MULTI, rid, *refused, received, n)
    sets = [ops._set(text) for _tags, _keys, text, _data in msgs]
    group = sets[0].group
    why = None
    if any(ps.group != group for ps in sets):
        why = "a SEND_MULTI's messages share their producer group (PGROUP)"
    elif any(ps.delay or ps.half for ps in sets):
        why = "delayed and transactional messages are sent one by one (SEND), not in a multi"
    if why is not None:
        return ops._refused(Op.SEND_MULTI, rid, *b.bad(why))
    nbytes = sum(len(data) for *_f, data in msgs)
    try:  # the size limit is each message's; flow control counts them all
        code, checked = b.check_send(topic, qid, max(len(data) for *_f, data in msgs), group,
                                     len(msgs))
    except (TopicError, ValueError) as exc:
        return ops._refused(Op.SEND_MULTI, rid, *b.bad(str(exc)))
    if code != Code.OK:
        return ops._failed(Op.SEND_MULTI, rid, code, checked, received, n)
    qid = checked
    try:
        if ident is None:
            prepared = [prepare(topic, tags, keys, ps, data)
                        for (tags, keys, _text, data), ps in zip(msgs, sets, strict=True)]
        else:
            pid, seq = ident.pid, ident.seq
            prepared = [prepare(topic, tags, keys, ps, data, seq_field(pid, seq + i))
                        for i, ((tags, keys, _text, data), ps)
                        in enumerate(zip(msgs, sets, strict=True))]
    except MessageIllegalError as exc:
        return ops._failed(Op.SEND_MULTI, rid, Code.MESSAGE_ILLEGAL, str(exc).encode(),
                           received, n)
    block = sum(rec[0] for rec in prepared)
    if block > b.store.config.commitlog_segment_bytes:  # one block in one segment
        return ops._refused(Op.SEND_MULTI, rid, *b.bad(
            f"a SEND_MULTI of {block} bytes does not fit one CommitLog segment "
            f"({b.store.config.commitlog_segment_bytes}): send fewer at a time"))
    each_keys = [keys.split() if keys else () for _tags, keys, _text, _data in msgs]
    traced = [i for i, ps in enumerate(sets) if ps.traced]

    def answer(code: int, result) -> bytes:
        if isinstance(result, str) or result.status is not PutStatus.PUT_OK:
            text = result if isinstance(result, str) else (result.reason or result.status.value)
            return ops._failed(Op.SEND_MULTI, rid, code, text.encode(), received, n)
        ok = code in ANSWERED_OK  # else stored short of a promise: a flush or slave timeout
        failure = not ok and ops._count_error(code, b"", n)
        sizes = [rec[0] for rec in prepared]
        answered_qid = qid
        if result.reason == DUPLICATE:  # stored by its first try: answered as that was
            answered_qid, sizes = ops.idempotent.answered_queue(result)
        else:
            b.pulls.arrived(topic, qid)
            b.heat.hit(topic, qid, n)
        if traced and result.reason != DUPLICATE:
            phys = result.physical_offset
            starts = [phys]
            for size in sizes[:-1]:
                starts.append(starts[-1] + size)
            for i in traced:
                b.trace_store.add(result._replace(physical_offset=starts[i],
                                                  queue_offset=result.queue_offset + i),
                                  topic, qid, code)
        took = perf_counter() - received
        b.recorder.record("send", took, n, nbytes, ok, failure, n)
        return p.encode_answer(Op.SEND_MULTI, rid, code, encode_multi_answer(
            answered_qid, result.queue_offset, result.store_timestamp, ops.host,
            result.physical_offset, sizes, took))

    store = b.store

    def put():
        return store.put_prepared(topic, qid, prepared, (), each_keys=each_keys)

    if ident is not None:
        put = ops.idempotent.put(ident, [rec[0] for rec in prepared], put)
    out = b.write_path.write(put, lambda code, result: reply(answer(code, result)))
    return None if out is None else answer(*out)
