"""An asyncio producer's sends of one turn of its loop, one frame a topic.

Sends made in the same turn (a paced load's due messages, a `gather` of sends) wait
for the turn's end, then leave as one SEND_MULTI per topic (protocol.multi): one
request for the broker to admit, store, replicate and answer, where each SEND paid
all of that. A send alone in its turn goes as a SEND, as before. By default nothing
waits longer than the turn it was made in; with `linger_s` (Kafka's linger.ms) a
topic's first send waits that long for others to ride with it, so that a producer
at a few hundred messages a second sends frames as full as one at thousands (a
frame costs every process it passes a wake-up; its messages cost little more).
Delayed and transactional messages never come here (the broker takes them one by one).

A broker that does not know SEND_MULTI (an older one: BAD_REQUEST "unknown op") is
sent the messages one by one from then on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker_core.protocol import Code, Op
from broker_core.protocol.multi import MAX_COUNT, encode_multi, send_prefix

Done = Callable[[object, BaseException | None], None]
Call = Callable[[Op, bytes, Done], None]
MAX_MULTI = 64  # messages a frame: a burst of thousands leaves as several, to several brokers
MAX_MULTI_BYTES = 32 * 1024  # ... and bodies a frame (one block of a broker's CommitLog)


class TurnBatcher:
    """`call(op, payload, done)`: start a send's attempts (the producer's)."""

    def __init__(self, call: Call, max_multi: int = MAX_MULTI, linger_s: float = 0.0) -> None:
        self._call = call
        self.max_multi = min(max_multi, MAX_COUNT)
        self.linger_s = linger_s
        self._pending: dict[str, list[tuple[bytes, Done]]] = {}
        self._bytes: dict[str, int] = {}  # of what waits, a topic
        self._armed = False
        self._prefixes: dict[str, bytes] = {}
        self.singles = False  # a broker refused SEND_MULTI: one by one from now on
        self.frames = self.messages = 0

    def add(self, topic: str, message: bytes, done: Done) -> None:
        """`message`: encoded by protocol.multi.encode_message; `done(result, exc)`."""
        if self.singles:
            self._one(topic, message, done)
            return
        waiting = self._pending.get(topic)
        if waiting is not None and self._bytes[topic] + len(message) > MAX_MULTI_BYTES:
            self._send(topic, self._pending.pop(topic))  # full: it leaves, this one waits
            waiting = None
        if waiting is None:
            waiting = self._pending[topic] = []
            self._bytes[topic] = 0
            if not self._armed:
                self._armed = True
                loop = asyncio.get_running_loop()
                if self.linger_s > 0:
                    loop.call_later(self.linger_s, self.flush)
                else:
                    loop.call_soon(self.flush)
        waiting.append((message, done))
        self._bytes[topic] += len(message)
        if len(waiting) >= self.max_multi:
            del self._pending[topic]
            self._send(topic, waiting)

    def flush(self) -> None:
        """The turn is over: what waits leaves now."""
        self._armed = False
        pending, self._pending = self._pending, {}
        self._bytes.clear()
        for topic, waiting in pending.items():
            self._send(topic, waiting)

    def _one(self, topic: str, message: bytes, done: Done) -> None:
        prefix = self._prefixes.get(topic)
        if prefix is None:
            prefix = self._prefixes[topic] = send_prefix(topic)
        self.frames += 1
        self.messages += 1
        self._call(Op.SEND, prefix + message, done)

    def _send(self, topic: str, waiting: list[tuple[bytes, Done]]) -> None:
        if len(waiting) == 1:
            self._one(topic, *waiting[0])
            return
        dones = [d for _m, d in waiting]

        def answered(results, exc: BaseException | None) -> None:
            if exc is not None and _unknown_op(exc):
                self.singles = True
                for message, done in waiting:
                    self._one(topic, message, done)
                return
            if exc is not None:
                for done in dones:
                    done(None, exc)
                return
            for done, result in zip(dones, results, strict=True):
                done(result, None)

        self.frames += 1
        self.messages += len(waiting)
        self._call(Op.SEND_MULTI, encode_multi(topic, -1, [m for m, _d in waiting]), answered)


def _unknown_op(exc: BaseException) -> bool:
    return getattr(exc, "code", None) == Code.BAD_REQUEST and "unknown op" in str(exc)
