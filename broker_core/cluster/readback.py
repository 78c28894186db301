"""Read a topic back, every queue of every group from offset 0: what a drill
checks its acknowledged messages against. Plain PULLs, no consumer group, so
nothing is committed and the read can be repeated."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from broker_core.client.connection import BrokerUnavailable, Connection
from broker_core.client.pulls import read_pull_answer
from broker_core.errors import BrokerError
from broker_core.protocol import (
    Code,
    Op,
    PullRequest,
    decode_json,
    encode_json,
    encode_pull,
)


def read_queue_bodies(conn: Connection, topic: str, queue_id: int,
                      timeout: float = 5.0) -> Iterable[bytes]:
    return (m.body for m in read_queue(conn, topic, queue_id, timeout))


def read_queue(conn: Connection, topic: str, queue_id: int, timeout: float = 5.0):
    """Every message of the queue, from its first kept, in order."""
    offset = 0
    while True:
        req = PullRequest("floodgate-readback", topic, [(queue_id, offset)], 1024, 0)
        code, body = conn.call(Op.PULL, encode_pull(req), timeout)
        if code not in (Code.OK, Code.PULL_NOT_FOUND):
            raise BrokerError(f"{conn.addr}: pull answered {Code(code).name}: "
                              f"{body.decode('utf-8', 'replace')}")
        ((state, msgs, _corrupt),) = read_pull_answer(body)
        status, next_offset, min_offset = state.status, state.next_offset, state.min_offset
        yield from msgs
        if status == "OFFSET_TOO_SMALL":
            next_offset = max(next_offset, min_offset)
        elif not msgs and next_offset == offset:
            return
        offset = next_offset


def read_topic(addrs: Iterable[str], topic: str,
               key: Callable[[bytes], str | None]) -> Counter:
    """How often each key (from `key(body)`, None: not counted) appears in `topic` on
    the brokers at `addrs` (one per group: its master, or a slave while it has none)."""
    seen: Counter = Counter()
    for addr in addrs:
        conn = Connection(addr)
        try:
            code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": False}), 5.0)
            if code == Code.TOPIC_NOT_EXIST:
                continue
            if code != Code.OK:
                raise BrokerError(f"{addr}: ROUTE answered {Code(code).name}")
            for qid in range(int(decode_json(body)["queues"])):
                for raw in read_queue_bodies(conn, topic, qid):
                    k = key(raw)
                    if k is not None:
                        seen[k] += 1
        except (BrokerUnavailable, TimeoutError) as exc:
            raise BrokerError(f"reading {topic} back from {addr}: {exc}") from None
        finally:
            conn.close()
    return seen
