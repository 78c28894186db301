"""What a RocketMQ client's messages add to floodgate's trace (broker_core.trace).

RocketMQ's own clients write no floodgate trace records (the official Python client
traces nothing; the Java one to its own trace topic), so the gRPC front end writes them
on their behalf:

* a send is traced when the message carries RocketMQ's ``trace_context`` (its client
  traces it) or the broker samples it (`--grpc-trace-rate`); it is stored with
  PROP_TRACE like a native traced send, and gets a ``send`` record: the client's id,
  its born time (`born`), the broker's time on it (the client's own RT and retries are
  not seen here) and the answer; a refused one, a record of all of it (by its keys);
* a traced message a pop hands out gets a ``deliver`` record (group, client, when),
  held until its acknowledgement (stamped with that time) or `HOLD_S`, as the native
  consumer holds its records until the commit that covers them.

The records go out with the broker's own (StoreTracer.flush, once a second while the
broker works); a delivery still held asks for a flush when its hold ends, else one
handed out just before the broker went idle would wait for its next work.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker_core.message_id import encode_id
from broker_core.trace.records import PROP_TRACE, Sampler

HOLD_S = 2.0  # a delivery not acknowledged this soon goes out as not committed
VIA = "gRPC"  # what a record made for a RocketMQ client says it came through


class GrpcTracer:
    def __init__(self, broker, rate: float, clock: Callable[[], float] = time.time,
                 hold_s: float = HOLD_S) -> None:
        self.broker, self.sampler, self.clock = broker, Sampler(rate), clock
        self.hold_s = hold_s
        self._records: list[dict] = []  # sends, and deliveries no longer held
        # (group, topic, queue, offset) -> a delivery record held for its acknowledgement
        self._held: dict[tuple[str, str, int, int], dict] = {}
        broker.trace_store.sources.append(self.drain)

    def traces(self, trace_context: str) -> bool:
        """Whether a send is traced: the client traces it, or the broker samples it."""
        return bool(trace_context) or self.sampler.sample()

    def sent(self, answer: tuple, keys: str, client: str, born_ms: int, broker_s: float) -> None:
        """A traced send stored: `answer` is decode_send_answer's (queue, queue offset,
        physical offset, store ms, service s, store host)."""
        _qid, _offset, phys, _ms, _service, host = answer
        ms = round(broker_s * 1000, 3)
        self._records.append({
            "type": "send", "id": encode_id(host or self.broker.trace_store.addr, phys),
            "keys": keys, "client": client, "born_ms": born_ms, "rt_ms": ms,
            "status": "SEND_OK", "broker": self.broker.config.name, "attempts": 1,
            "retries": [], "broker_ms": ms, "fuse": None, "via": VIA})

    def refused(self, topic: str, tags: str, keys: str, client: str, born_ms: int,
                nbytes: int, code: str, why: str) -> None:
        """A traced send refused: nothing stored, so the record holds all of it (found
        by the message's keys, as a native failed send is)."""
        self._records.append({
            "type": "send", "id": None, "topic": topic, "tags": tags, "keys": keys,
            "client": client, "born_ms": born_ms, "rt_ms": None, "bytes": nbytes,
            "status": "FAILED", "broker": self.broker.config.name, "attempts": 1,
            "retries": [], "error": f"{code}: {why}", "via": VIA})

    def delivered(self, group: str, client: str, taken: list) -> None:
        """What one receive handed out: [(message, receipt, attempt)]."""
        now = self.clock()
        for m, _receipt, _attempt in taken:
            if PROP_TRACE not in (m.properties or {}):
                continue
            key = (group, m.topic, m.queue_id, m.queue_offset)
            if (old := self._held.pop(key, None)) is not None:  # handed out again
                self._records.append(old)
            self._held[key] = {"type": "deliver", "id": m.msg_id, "group": group,
                               "client": client, "broker": self.broker.config.name,
                               "pulled_ms": int(now * 1000), "committed_ms": None,
                               "via": VIA, "at": now}
        if self._held:
            self.broker.trace_store.flush_within(self.hold_s)

    def acked(self, group: str, topic: str, qid: int, offset: int) -> None:
        record = self._held.pop((group, topic, qid, offset), None)
        if record is not None:
            record["committed_ms"] = int(self.clock() * 1000)
            self._records.append(record)

    def drain(self, final: bool = False) -> list[dict]:
        """The records ready to be written; deliveries still held stay (`final`: all)."""
        now = self.clock()
        for key, record in list(self._held.items()):
            if final or record["at"] <= now - self.hold_s:
                self._records.append(self._held.pop(key))
        if self._held:
            oldest = min(r["at"] for r in self._held.values())
            self.broker.trace_store.flush_within(oldest + self.hold_s - now)
        out, self._records = self._records, []
        for r in out:
            r.pop("at", None)
        return out


def born(stamp) -> int:
    """When the client made a message (ms): its born time, or, from a client that stamps
    whole seconds (RocketMQ's Python client does), when the broker received it: else a
    send would read as up to a second slower than it was."""
    return stamp.ToMilliseconds() if stamp.nanos else int(time.time() * 1000)


def client_of(ctx) -> str:
    """The RocketMQ client behind a call: the id it sends with each request (its
    `x-mq-client-id`), else its peer address."""
    if ctx is None:
        return "?"
    for key, value in ctx.invocation_metadata() or ():
        if key == "x-mq-client-id" and value:
            return str(value)
    return ctx.peer() or "?"
