"""END_TRANSACTION, CHECK_TRANSACTION and LIST_TRANSACTIONS (PROTOCOL.md), and the
check-back pass, over the broker's TxService (server.transactions).

Only a master answers them: its slaves hold the same halves and ops (they are
records) and rebuild the pending set when promoted.
"""

from __future__ import annotations

import asyncio
import base64
import logging

from broker_core import protocol as p
from broker_core.protocol import Code, Op
from broker_core.protocol.delay import PROP_REAL_QID
from broker_core.protocol.transactions import (
    HALF_TOPIC,
    RESOLVERS,
    Consumed,
    TxState,
    poll_s_error,
)
from broker_core.server.tx_table import committed_copy_props

log = logging.getLogger("floodgate.broker")

CHECK_PASS_S = 0.5  # how often unanswered checks are counted and exhausted halves rolled back
MAX_CHECKS_PER_ANSWER = 256


class EndRequest:
    """An END_TRANSACTION: the halves it settles (one, `offset`, or several, `halves`:
    a transform's output), how, by whom, and the offsets it commits (`consumed`)."""

    def __init__(self, body: bytes) -> None:
        req = p.decode_json(body)
        halves = req.get("halves", [req.get("offset")])
        decision, by = str(req.get("decision", "")), str(req.get("by", ""))
        if (not isinstance(halves, list) or not (halves or req.get("consumed"))
                or not all(type(h) is int and h >= 0 for h in halves)):
            raise p.ProtocolError(f"offset (or halves) must be half messages' offsets, got "
                                  f"{req.get('offset', halves)!r}")
        if decision not in (TxState.COMMIT, TxState.ROLLBACK):
            raise p.ProtocolError(f"decision must be COMMIT or ROLLBACK, got {decision!r}")
        if by not in RESOLVERS[:3]:
            raise p.ProtocolError(f"by must be one of {', '.join(RESOLVERS[:3])}, got {by!r}")
        self.consumed = None
        if req.get("consumed") is not None and decision == TxState.COMMIT:
            try:
                self.consumed = Consumed.parse(req["consumed"])
            except ValueError as exc:
                raise p.ProtocolError(str(exc)) from None
        if not halves and self.consumed is None:
            raise p.ProtocolError("a transaction without halves commits a group's offsets")
        self.halves = list(dict.fromkeys(halves))
        self.decision, self.by = TxState(decision), by

    @classmethod
    def of(cls, offset: int, decision: TxState, by: str) -> EndRequest:
        """The broker's own (the checks ran out), past the checks on what clients say."""
        req = cls.__new__(cls)
        req.halves, req.decision, req.by, req.consumed = [offset], decision, by, None
        return req


def end_frame(broker, rid: int, body: bytes, reply) -> bytes | None:
    """END_TRANSACTION from the TCP side, in the order of the connection's frames: its
    commit is stored before the frames after it are read (a producer that sends the
    next message of its order right after `send_in_transaction`, the END one way, must
    not see that message stored first). The answer frame now, or None and `reply`."""
    def frame(code: int, text: bytes) -> bytes:
        return p.encode_answer(Op.END_TRANSACTION, rid, code, text)

    try:
        req = EndRequest(body)
    except p.ProtocolError as exc:
        return frame(*broker.bad(str(exc)))
    if (refused := broker.write_refusal()) is not None:
        return frame(*refused)
    out = start_end(broker, req, lambda code, text: reply(frame(code, text)))
    return None if out is None else frame(*out)


async def end_transaction(broker, body: bytes) -> tuple[int, bytes]:
    req = EndRequest(body)
    if (refused := broker.write_refusal()) is not None:
        return refused
    return await _awaited(broker, req)


async def resolve(broker, offset: int, decision: TxState, by: str) -> tuple[int, bytes]:
    return await _awaited(broker, EndRequest.of(offset, decision, by))


async def _awaited(broker, req: EndRequest) -> tuple[int, bytes]:
    fut = asyncio.get_running_loop().create_future()
    out = start_end(broker, req, lambda code, text: fut.done() or fut.set_result((code, text)))
    return out if out is not None else await fut


def start_end(broker, req: EndRequest, done) -> tuple[int, bytes] | None:
    """Settle a transaction's halves: the outcome is written now (the write path's
    common case) or queued behind what came before. (code, answer) now, or None and
    `done(code, answer)` once written and, with sync replication, held by the slaves.
    A commit whose halves were partly settled already (a check-back rolled one back) or
    whose consumer was fenced (server.tx_commits) rolls the rest back instead."""
    tx = broker.tx
    tx.catch_up()  # a promoted master's offsets: the commits read back first
    states = [tx.state_of(h, caught_up=True) for h in req.halves]
    if "unknown" in states:
        missing = req.halves[states.index("unknown")]
        return Code.MESSAGE_NOT_FOUND, (f"no half message at offset {missing} on "
                                        f"{broker.config.name}").encode()
    pending = [h for h, s in zip(req.halves, states, strict=True) if s == "pending"]
    if not pending and req.halves:  # resolved already (or being): nothing delivered twice
        tx.counters["duplicate_ends_total"] += 1
        return Code.OK, p.encode_json({"state": states[0], "already": True})
    why: list[str] = []
    if len(pending) < len(req.halves) and req.decision is TxState.COMMIT:
        why.append("part of the transaction was settled already (a check-back): the rest "
                   "rolled back")
    tx.resolving.update(pending)

    def put():
        if not why and req.consumed is not None:
            if (reason := tx.fence(req.consumed)) is not None:
                why.append(reason)
        if why:
            tx.counters["fenced_total"] += 1
            return tx.end(pending, TxState.ROLLBACK, "fenced")
        return tx.end(pending, req.decision, req.by, req.consumed)

    def answer(code: int, result) -> tuple[int, bytes]:
        tx.resolving.difference_update(pending)
        if isinstance(result, str) or not result.ok:
            reason = result if isinstance(result, str) else (result.reason or result.status.value)
            return (code if code != Code.OK else Code.SYSTEM_ERROR), reason.encode()
        if why and code == Code.OK:
            return Code.FENCED, why[0].encode()
        state = tx.state_of(pending[0]) if pending else "committed"  # offsets alone
        return code, p.encode_json({"state": state, "already": False})

    out = broker.write_path.write(put, lambda code, result: done(*answer(code, result)))
    return None if out is None else answer(*out)


async def check_transaction(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    group = str(req.get("group") or "")
    if not group:
        raise p.ProtocolError("a check-back request names its producer group")
    poll_s = req.get("poll_s")  # how often it asks (absent: a producer of before)
    if poll_s is not None and (why := poll_s_error(poll_s)) is not None:
        raise p.ProtocolError(f"a check-back request's {why}")
    if (refused := broker.write_refusal()) is not None:
        return refused
    docs = []
    for half in broker.tx.checks_for(group, poll_s)[:MAX_CHECKS_PER_ANSWER]:
        got = broker.store.get(HALF_TOPIC, 0, half.offset, 1)
        if not got.messages:
            continue
        m = got.messages[0]
        docs.append({"offset": half.offset, "msg_id": m.msg_id, "topic": half.topic,
                     "queue_id": int((m.properties or {}).get(PROP_REAL_QID, "0") or 0),
                     "body": base64.b64encode(m.body).decode(), "tags": m.tags,
                     "keys": m.keys, "properties": committed_copy_props(m) or {},
                     "born_ms": m.born_timestamp, "checks": half.checks})
    return Code.OK, p.encode_json({"broker": broker.config.name, "checks": docs})


async def list_transactions(broker, body: bytes) -> tuple[int, bytes]:
    req = p.decode_json(body)
    group = req.get("group")
    if (refused := broker.write_refusal()) is not None:
        return refused
    return Code.OK, p.encode_json({"broker": broker.config.name,
                                   "pending": broker.tx.listing(str(group) if group else None),
                                   "figures": broker.tx.figures()})
