"""PULL: one request for any number of a topic's queues on a broker, and its answer.

A consumer keeps one pull outstanding per broker for all the queues it owns there
(not one per queue: at tens of thousands of queues that would be as many held
requests and wake-ups). The answer gives every queue's state, then the messages
as the CommitLog holds them (RocketMQ's record layout, `protocol.record`), queue
after queue: a broker answers with the stored bytes (one gather write, no decode
and re-encode) and the consumer decodes and verifies them (`protocol.record_batch.
decode_records`).

    request  group str16 | topic str16 | tag str16 | max msgs u16 | timeout ms u32 |
             session u64 | epoch u32 |
             n u16 | n × (queue id i32, offset i64) | optionally, the group's offsets
             to commit (acks ride the pull, as RocketMQ's pull carries its commit
             offset): m u16 | reset i64 | m × (queue id i32, offset i64)
    answer   n u16 | n × (queue id i32, status u8, next i64, min i64, max i64,
             count u32) | the records of the first queue, then the second, ...

Pull sessions (Kafka's incremental fetch, KIP-227): a consumer of many queues names
them all once, in a pull of epoch 0 under a session id it chose, and from then on
sends only what changed (epoch 1, 2, ...): the queues whose offsets moved, those it
adds, and those it stops reading (offset QUEUE_GONE). The broker keeps the session's queues
and which of them have something to answer, so a pull costs it what changed and what
it answers, not a pass over a thousand queues. Session 0: no session, every queue
named each time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker_core.protocol.codecs import Reader, _str16
from broker_core.protocol.frame import ProtocolError

__all__ = [
    "PullRequest",
    "QueueState",
    "encode_pull",
    "decode_pull",
    "PULL_STATUSES",
    "MAX_PULL_MSGS",
    "MAX_PULL_QUEUES",
    "MAX_PULL_WAIT_MS",
    "encode_pull_head",
    "decode_pull_head",
    "QUEUE_GONE",
]

_PULL_HEAD = struct.Struct(">HIQIH")  # max msgs, timeout ms, session, epoch, queue count
_QUEUE_AT = struct.Struct(">iq")  # queue id, offset
_COUNT = struct.Struct(">H")
_COMMIT_HEAD = struct.Struct(">Hq")  # queues committed, the last reset the consumer heard of
_QUEUE_STATE = struct.Struct(">iBqqqI")  # queue id, status, next, min, max, record count
MAX_PULL_MSGS = 1024
MAX_PULL_QUEUES = 4096
MAX_PULL_WAIT_MS = 60_000
QUEUE_GONE = -1  # an incremental pull's offset for a queue the session no longer reads

# pull status byte: mirrors the store's GetStatus names
PULL_STATUSES = (
    "FOUND",
    "NO_NEW_MSG",
    "OFFSET_OVERFLOW",
    "OFFSET_TOO_SMALL",
    "NO_MATCHED_MSG",
    "NO_QUEUE",
    "NOT_READ",  # the answer was full before this queue's turn: ask again from the same offset
)
_STATUS_INDEX = {name: i for i, name in enumerate(PULL_STATUSES)}


@dataclass(slots=True)
class PullRequest:
    """`queues`: (queue id, offset) pairs; `max_msgs` bounds the whole answer, taken
    from the queues in the order given (a consumer rotates it)."""

    group: str
    topic: str
    queues: list[tuple[int, int]] = field(default_factory=list)
    max_msgs: int = 32
    timeout_ms: int = 0
    tag: str = ""
    # (queue id, offset) the group commits with this pull (COMMIT_OFFSET's), and the
    # last reset of its offsets the consumer heard of (epoch ms)
    commit: list[tuple[int, int]] = field(default_factory=list)
    reset: int = 0
    # a pull session (0: none): epoch 0 names every queue and (re)starts it, epoch n > 0
    # follows epoch n - 1 with what changed (`queues`, QUEUE_GONE for a queue dropped)
    session: int = 0
    epoch: int = 0

    @property
    def incremental(self) -> bool:
        return self.session != 0 and self.epoch > 0


class QueueState:
    """One queue's part of an answer: where it stands, and how many records follow."""

    __slots__ = ("queue_id", "status", "next_offset", "min_offset", "max_offset", "count")

    def __init__(self, queue_id: int, status: str, next_offset: int, min_offset: int,
                 max_offset: int, count: int) -> None:
        self.queue_id, self.status, self.next_offset = queue_id, status, next_offset
        self.min_offset, self.max_offset, self.count = min_offset, max_offset, count

    def __repr__(self) -> str:
        return (f"QueueState({self.queue_id}, {self.status}, next={self.next_offset}, "
                f"min={self.min_offset}, max={self.max_offset}, count={self.count})")


def encode_pull(req: PullRequest) -> bytes:
    if not (0 if req.incremental else 1) <= len(req.queues) <= MAX_PULL_QUEUES:
        raise ProtocolError(f"a pull names 1..{MAX_PULL_QUEUES} queues, not {len(req.queues)}")
    if len(req.commit) > MAX_PULL_QUEUES:
        raise ProtocolError(f"a pull commits 0..{MAX_PULL_QUEUES} queues")
    commit = (_COMMIT_HEAD.pack(len(req.commit), req.reset),
              *(_QUEUE_AT.pack(q, o) for q, o in req.commit)) if req.commit else ()
    return b"".join((_str16(req.group), _str16(req.topic), _str16(req.tag),
                     _PULL_HEAD.pack(req.max_msgs, req.timeout_ms, req.session, req.epoch,
                                     len(req.queues)),
                     *(_QUEUE_AT.pack(q, o) for q, o in req.queues), *commit))


def decode_pull(body: bytes) -> PullRequest:
    r = Reader(body)
    group, topic, tag = r.str16(), r.str16(), r.str16()
    max_msgs, timeout_ms, session, epoch, n = r.unpack(_PULL_HEAD)
    incremental = session != 0 and epoch > 0
    if not 1 <= max_msgs <= MAX_PULL_MSGS:
        raise ProtocolError(f"max_msgs {max_msgs} out of 1..{MAX_PULL_MSGS}")
    if timeout_ms > MAX_PULL_WAIT_MS:
        raise ProtocolError(f"pull timeout {timeout_ms} ms above {MAX_PULL_WAIT_MS}")
    if not (0 if incremental else 1) <= n <= MAX_PULL_QUEUES:
        raise ProtocolError(f"a pull names 1..{MAX_PULL_QUEUES} queues, not {n}")
    end = r.pos + n * _QUEUE_AT.size
    if len(body) < end:
        raise ProtocolError(f"a pull of {n} queues needs {n * _QUEUE_AT.size} bytes of "
                            f"queues, has {len(body) - r.pos}")
    queues = list(_QUEUE_AT.iter_unpack(memoryview(body)[r.pos:end]))
    commit, reset = [], 0
    if len(body) > end:
        r.pos = end
        m, reset = r.unpack(_COMMIT_HEAD)
        if len(body) - r.pos != m * _QUEUE_AT.size:
            raise ProtocolError(f"a pull committing {m} queues needs {m * _QUEUE_AT.size} "
                                f"bytes of them, has {len(body) - r.pos}")
        commit = list(_QUEUE_AT.iter_unpack(memoryview(body)[r.pos:]))
    least = QUEUE_GONE if incremental else 0  # (an incremental pull drops a queue with QUEUE_GONE)
    if any(q < 0 or o < least for q, o in queues) or any(q < 0 or o < 0 for q, o in commit):
        raise ProtocolError("a negative queue id or offset")
    return PullRequest(group, topic, queues, max_msgs, timeout_ms, tag, commit, reset,
                       session, epoch)


def encode_pull_head(states: list[tuple[int, str, int, int, int, int]]) -> bytes:
    """The answer's head: per queue (id, status, next, min, max, record count); the
    records follow it, queue after queue."""
    return _COUNT.pack(len(states)) + b"".join(
        _QUEUE_STATE.pack(q, _STATUS_INDEX[s], n, lo, hi, c) for q, s, n, lo, hi, c in states)


def decode_pull_head(body: bytes | memoryview) -> tuple[list[QueueState], int]:
    """(the queues' states, where their records start)."""
    if len(body) < _COUNT.size:
        raise ProtocolError(f"pull answer of {len(body)} bytes is shorter than its head")
    (n,) = _COUNT.unpack_from(body)
    end = _COUNT.size + n * _QUEUE_STATE.size
    if len(body) < end:
        raise ProtocolError(f"pull answer of {len(body)} bytes is shorter than its head "
                            f"of {n} queues")
    states = []
    for q, s, nxt, lo, hi, c in _QUEUE_STATE.iter_unpack(memoryview(body)[_COUNT.size:end]):
        if s >= len(PULL_STATUSES):
            raise ProtocolError(f"unknown pull status {s}")
        states.append(QueueState(q, PULL_STATUSES[s], nxt, lo, hi, c))
    return states, end
