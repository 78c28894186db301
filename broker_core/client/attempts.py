"""One send's attempts, without I/O: which broker to try next, and what its
answer means. Both producers (threaded and asyncio) drive the same plan, so
the retry rules and what the fuse hears are written once.

RocketMQ's synchronous send: up to 1 + `retries` attempts, each on a broker
not tried yet while there is one (seed 002's send retries). Every attempt is
a fuse call: `next()` chooses through the fuse and begins the call, `answer()`
ends it, with the broker's own service time when its answer carries one. A
broker that answered with the caller's own error (too large, bad request) is
healthy; one that timed out, refused or failed to flush is not.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from broker_core.client.connection import is_local
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_batch_response, decode_send_response

# Codes after which another broker may succeed; the others are the caller's fault.
RETRYABLE = frozenset({Code.SYSTEM_BUSY, Code.SYSTEM_ERROR, Code.SERVICE_NOT_AVAILABLE,
                       Code.DISK_FULL, Code.NOT_MASTER})
# Stored: OK, or stored but short of a promise (not on disk, not on a slave in time).
# The latter are not sent again (that would store a duplicate) and count against the broker.
STORED = (Code.OK, Code.FLUSH_DISK_TIMEOUT, Code.FLUSH_SLAVE_TIMEOUT, Code.SLAVE_NOT_AVAILABLE)


class SendFailed(BrokerError):
    """Every attempt failed; `code` is the last broker answer (None: no answer)."""

    def __init__(self, message: str, code: Code | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class SendResult:
    status: str  # SEND_OK, or FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE
    broker: str
    queue_id: int
    queue_offset: int
    count: int = 1
    attempts: int = 1
    broker_s: float | None = None  # the broker's own service time, when it reports one


def normalize_brokers(brokers: Sequence[str] | Mapping[str, str] | str) -> dict[str, str]:
    """Name -> address. A list of addresses names each broker by its address."""
    if isinstance(brokers, str):
        brokers = [b for b in brokers.split(",") if b.strip()]
    if isinstance(brokers, Mapping):
        out = dict(brokers)
    else:
        out = {b.strip(): b.strip() for b in brokers}
    if not out:
        raise ValueError("no brokers given")
    return out


def default_fuse(brokers: Mapping[str, str], clock: Callable[[], float] = time.monotonic):
    """The fuse a producer gets unless it is given one (or `fuse=False`); brokers on
    this host are marked co-located (they share its cores)."""
    from fuse import Fuse

    return Fuse(list(brokers), clock=clock,
                colocated=[b for b, addr in brokers.items() if addr and is_local(addr)])


class SendPlan:
    """The attempts of one send. Drive it as::

        plan = SendPlan(fuse, names, retries, op, rr)
        while True:
            broker = plan.next()
            ... send to broker: (code, body) or a reason it got no answer ...
            kind, value = plan.answer(code, body, reason)
            if kind != "retry": return value (a SendResult) or raise value (SendFailed)
    """

    __slots__ = ("fuse", "names", "retries", "op", "rr", "tried", "attempt", "broker", "token")

    def __init__(self, fuse, names: Sequence[str], retries: int, op: Op,
                 rr: itertools.count) -> None:
        self.fuse, self.names, self.retries, self.op, self.rr = fuse, names, retries, op, rr
        self.tried: list[str] = []
        self.attempt = 0
        self.broker = ""
        self.token = None

    def next(self) -> str:
        """The broker for the next attempt (its fuse call begins now)."""
        candidates = [b for b in self.names if b not in self.tried] or self.names
        self.attempt += 1
        if self.fuse is not None:
            self.broker = self.fuse.choose(candidates)
            self.token = self.fuse.begin(self.broker)
        else:
            self.broker = candidates[next(self.rr) % len(candidates)]
        return self.broker

    def answer(self, code: Code | None, body: bytes | None, reason: str = "",
               closing: bool = False) -> tuple[str, object]:
        """The attempt's outcome: ("ok", SendResult), ("fail", SendFailed) or
        ("retry", why); reports the call to the fuse."""
        broker, broker_ok = self.broker, code is not None and code not in RETRYABLE
        broker_ok = broker_ok and (code == Code.OK or code not in STORED)
        if code in STORED:
            try:
                result = self._result(code, body)
            except BrokerError as exc:
                self._end(False)
                return "fail", SendFailed(f"{broker}: bad response: {exc}")
            self._end(broker_ok, result.broker_s)
            return "ok", result
        self._end(broker_ok)
        if code is not None and code not in RETRYABLE:
            message = body.decode("utf-8", "replace") if body else code.name
            return "fail", SendFailed(f"{broker}: {code.name}: {message}", code)
        why = reason or f"{code.name}: {body.decode('utf-8', 'replace') if body else ''}"
        if self.attempt > self.retries or closing:
            return "fail", SendFailed(
                f"send failed after {self.attempt} attempt(s); last from {broker}: {why}", code)
        self.tried.append(broker)
        return "retry", why

    def _result(self, code: Code, body: bytes | None) -> SendResult:
        status = "SEND_OK" if code == Code.OK else code.name
        if self.op == Op.SEND:
            qid, qoff, _phys, _ts, broker_s = decode_send_response(body)
            return SendResult(status, self.broker, qid, qoff, 1, self.attempt, broker_s)
        qid, first, count, broker_s = decode_batch_response(body)
        return SendResult(status, self.broker, qid, first, count, self.attempt, broker_s)

    def _end(self, ok: bool, broker_s: float | None = None) -> None:
        if self.token is not None:
            self.fuse.end(self.token, ok=ok, broker_s=broker_s)
            self.token = None
