"""Transactional messages (RocketMQ's half messages): the property that makes a send a
half, the system topics the broker keeps them and their outcomes in, the states a
producer's local transaction and its check-back answer with, and the check-back
schedule.

A half is stored in HALF_TOPIC queue 0 with its real topic and queue in properties
(as a delayed message is: protocol.delay); END_TRANSACTION commits it (the broker
stores it in its real queue) or rolls it back, and either way appends an op record
to OP_TOPIC queue 0 naming the half's offset: the ops are the truth a restart, a
SIGKILL or a promoted slave rebuilds the pending set from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

PROP_TX_HALF = "TRAN_MSG"  # "true" on a half message (RocketMQ's property)
# on a transform's output: the input it was made of, TOPIC:QUEUE:OFFSET (client.transform)
PROP_CONSUMED_FROM = "CONSUMED_FROM"
HALF_TOPIC = "%TX_HALF%"
OP_TOPIC = "%TX_OP%"

CHECK_AFTER_S = 6.0  # a half unresolved this long is checked back (RocketMQ: 6 s)
CHECK_INTERVAL_S = 6.0  # ... and again this often
MAX_CHECKS = 15  # ... at most this many times, then rolled back (RocketMQ: 15)
PRODUCER_ALIVE_S = 5.0  # a producer group that asked for checks this recently is alive,
MISSED_ASKS = 2  # ... or, asking every POLL seconds (its CHECK_TRANSACTION says), until
MAX_POLL_S = 60.0  # it missed this many asks: one asking every 5 s was taken for gone
# between its asks, each check spent unseen and the half rolled back 90 s later


def poll_s_error(value) -> str | None:
    """Why `value` is no check-back poll interval (None: it is one): the producer's
    setting and its CHECK_TRANSACTION's field alike."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value <= MAX_POLL_S:
        return f"poll_s is seconds in (0, {MAX_POLL_S:g}], not {value!r}"
    return None


class TxState(StrEnum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


# who resolved a half: its producer right after the local transaction, its producer
# group answering a check-back, an operator (`floodgate tx resolve`), the broker when
# the checks ran out, or the broker refusing a commit whose consumer lost its queue
RESOLVERS = ("producer", "check", "operator", "checks-exhausted", "fenced")


@dataclass(frozen=True)
class Consumed:
    """What a consume-transform-produce transaction read: its consumer group's offsets
    in one input topic, committed with the output or not at all. `queues`: queue id ->
    (the offset it read from, the offset past what it read, its lock's epoch, and what
    the last message it read was: `fingerprint`)."""

    group: str
    topic: str
    client_id: str
    queues: dict[int, tuple[int, int, int, str]]

    def document(self) -> dict:
        return {"group": self.group, "topic": self.topic, "client_id": self.client_id,
                "queues": {str(q): list(v) for q, v in sorted(self.queues.items())}}

    @classmethod
    def parse(cls, doc) -> Consumed:
        """From a request or an op record; ValueError saying what is wrong."""
        if not isinstance(doc, dict):
            raise ValueError(f"consumed must be an object, got {doc!r}")
        group, topic, client = doc.get("group"), doc.get("topic"), doc.get("client_id")
        if not all(isinstance(x, str) and x for x in (group, topic, client)):
            raise ValueError("consumed names its group, topic and client_id")
        queues = {}
        for qid, v in (doc.get("queues") or {}).items():
            if (not str(qid).isdigit() or not isinstance(v, list) or len(v) != 4
                    or not all(type(x) is int and x >= 0 for x in v[:3]) or v[1] < v[0]
                    or not isinstance(v[3], str)):
                raise ValueError(f"consumed queue {qid!r} must be [from, to, epoch, "
                                 f"fingerprint] with 0 <= from <= to, got {v!r}")
            queues[int(qid)] = (v[0], v[1], v[2], v[3])
        if not queues:
            raise ValueError("consumed names at least one queue")
        return cls(group, topic, client, queues)


def fingerprint(message) -> str:
    """Which record a message is, beyond its queue offset: the master that stored it,
    where, and when. After a failover a queue's offset can hold another message (the
    old master's unreplicated tail cut, the new one's written there); a commit of
    offsets read from the old one must not pass for the new."""
    return f"{message.msg_id}@{message.store_timestamp}"


@dataclass(frozen=True)
class TxOp:
    """An op record: how its halves went, who said so, and the offsets it commits."""

    decision: TxState
    halves: tuple[int, ...]
    by: str
    consumed: Consumed | None = None


def op_body(decision: TxState, halves, by: str, consumed: Consumed | None = None) -> bytes:
    """One record for the whole transaction: every half it settles and the offsets it
    commits (recovery treats it as the commit: server.tx_commits). A lone half keeps the
    short form earlier brokers wrote."""
    halves = [halves] if isinstance(halves, int) else list(halves)
    if len(halves) == 1 and consumed is None:
        return f"{decision.value} {halves[0]} {by}".encode()
    doc = {"d": decision.value, "halves": halves, "by": by}
    if consumed is not None:
        doc["consumed"] = consumed.document()
    return json.dumps(doc, separators=(",", ":")).encode()


def parse_op(body: bytes) -> TxOp | None:
    """An op record's content; None when it is not one."""
    try:
        if body[:1] == b"{":
            doc = json.loads(body)
            consumed = doc.get("consumed")
            return TxOp(TxState(doc["d"]), tuple(int(h) for h in doc["halves"]),
                        str(doc["by"]), None if consumed is None else Consumed.parse(consumed))
        decision, offset, by = body.decode().split(" ", 2)
        return TxOp(TxState(decision), (int(offset),), by)
    except (ValueError, KeyError, TypeError):
        return None


def tx_id(broker: str, half_offset: int) -> str:
    """How an operator names a half: the broker (or group) holding it and its offset."""
    return f"{broker}:{half_offset}"


def parse_tx_id(text: str) -> tuple[str, int]:
    broker, sep, offset = text.rpartition(":")
    if not sep or not broker or not offset.isdigit():
        raise ValueError(f"a transaction id is BROKER:OFFSET as `floodgate tx list` shows it, "
                         f"not {text!r}")
    return broker, int(offset)
