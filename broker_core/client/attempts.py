"""One send's attempts, without I/O: which broker to try next, and what its
answer means. Both producers (threaded and asyncio) drive the same plan, so
the retry rules and what the fuse hears are written once.

RocketMQ's synchronous send: up to 1 + `retries` attempts, each on a broker
not tried yet while there is one (the RocketMQ design talk's send retries). Every attempt is
a fuse call: `next()` chooses through the fuse and begins the call, `answer()`
ends it, with the broker's own service time when its answer carries one. A
broker that answered with the caller's own error (too large, bad request) is
healthy; one that timed out, refused or failed to flush is not.

Send backoff (the RocketMQ design talk: "three compensations, each after a set interval"): a
FLOW_CONTROL answer is the broker protecting its capacity, not a fault: the
fuse hears a healthy call, and the send waits the broker's retry-after hint
(at least the next `backoff` interval, at most `MAX_BACKOFF_S`) before trying
again, up to `flow_retries` times. `backoff` intervals also space the retries
after a failed attempt (default none: the fuse already sends it elsewhere).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker_core.client.idempotence import (
    IDEMPOTENT_OPS,
    RETRY_HORIZON_S,
    SAME_GROUP_BACKOFF_S,
    Idempotence,
)
from broker_core.errors import BrokerError
from broker_core.message_id import encode_id
from broker_core.protocol import (
    PRODUCER_GROUP,
    STORED_CODES,
    Code,
    Op,
    ProtocolError,
    decode_batch_response,
    decode_flow_control,
    decode_send_answer,
)
from broker_core.protocol.multi import decode_multi_answer

# Codes after which another broker may succeed; the others are the caller's fault.
RETRYABLE = frozenset({Code.SYSTEM_BUSY, Code.SYSTEM_ERROR, Code.SERVICE_NOT_AVAILABLE,
                       Code.DISK_FULL, Code.NOT_MASTER, Code.UNACKNOWLEDGED})
# Stored (protocol.STORED_CODES): OK, or stored but short of a promise (not on disk, not on
# a slave in time). The latter are not sent again (that would store a duplicate) and count
# against the broker.
STORED = STORED_CODES
FLOW_RETRIES = 3  # the RocketMQ design talk's three compensations
MAX_BACKOFF_S = 1.0  # a hint longer than this is the broker's guess, not a promise
DEFAULT_HINT_S = 0.05
# with a deadline, the waits before each round over the brokers after the first (a cluster
# refusing everywhere at once is asked again a few times a second, not in a loop)
ROUND_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
# a send's budget when its producer names none: a failover (a ZooKeeper session and a
# promotion, 2-3 s) and a partition's healing fit; an SRE hears of a cut-off group in
# 10 s, not a minute (Kafka's 120 s)
DEFAULT_DEADLINE_S = 10.0
COUNTED_RETRIES = 2  # what `retries` means when the budget is a deadline (none counted)
LAST_ATTEMPT_S = 0.01  # a deadline's last attempt starts at least this long before it
FLOW_BACKOFF_FLOOR_S = 0.01  # the first wait after FLOW_CONTROL; doubles each time  # a FLOW_CONTROL answer without a readable hint


@dataclass(frozen=True, slots=True)
class SendOptions:
    """How a producer retries: `flow_retries` after FLOW_CONTROL, the `backoff`
    intervals (s) before the 1st, 2nd, ... retry; `group` is the producer group brokers'
    quotas see (the message property PGROUP).

    The retry budget is a time, `deadline_s` from the send (Kafka's delivery.timeout.ms;
    DEFAULT_DEADLINE_S when neither it nor `retries` is given): attempts go on, each on a
    broker not tried yet, then round again spaced by ROUND_BACKOFF_S, until it passes.
    Given `retries` alone, it is 1 + `retries` attempts (RocketMQ's count) instead."""

    retries: int | None = None
    flow_retries: int = FLOW_RETRIES
    backoff: tuple[float, ...] = ()
    group: str = ""
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.retries is None:
            object.__setattr__(self, "retries", COUNTED_RETRIES)
            if self.deadline_s is None:
                object.__setattr__(self, "deadline_s", DEFAULT_DEADLINE_S)
        if self.retries < 0 or self.flow_retries < 0:
            raise ValueError("retries and flow_retries must be >= 0")
        if self.deadline_s is not None and not 0 < self.deadline_s <= RETRY_HORIZON_S:
            raise ValueError(f"deadline_s must be within (0, {RETRY_HORIZON_S:g}] s: a "
                             "broker remembers an idempotent send for twice that")
        if any(not 0 <= b <= 60 for b in self.backoff):
            raise ValueError("backoff intervals must be between 0 and 60 s")


class SendCounters:
    """A producer's throttling figures (its /metrics): thread-safe, off the fast path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = {"flow_control": 0, "flow_control_gave_up": 0, "backoff_s": 0.0}

    def add(self, name: str, n: float = 1) -> None:
        with self._lock:
            self.values[name] += n

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.values)


class SendFailed(BrokerError):
    """Every attempt failed; `code` is the last broker answer (None: no answer)."""

    def __init__(self, message: str, code: Code | None = None,
                 retries: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.retries = retries  # why each earlier attempt was given up ("broker: reason")


class Unauthenticated(SendFailed):
    """A broker refused the client's credentials: no send of this client will pass."""


@dataclass(frozen=True, slots=True)
class SendResult:
    status: str  # SEND_OK, or FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE
    broker: str
    queue_id: int
    queue_offset: int
    count: int = 1
    attempts: int = 1
    broker_s: float | None = None  # the broker's own service time, when it reports one
    msg_id: str | None = None  # SEND: the message id (broker_core.message_id), None for a batch
    retries: tuple[str, ...] = ()  # why each earlier attempt was given up ("broker: reason")
    store_ms: int = 0  # SEND: the broker's store time


def stored_short(code: Code) -> str:
    """What the fuse hears of a send stored short of its promise."""
    return f"{code.name}: stored short of its promise"


NO_SLAVE_IN_SYNC = stored_short(Code.SLAVE_NOT_AVAILABLE)  # what a one-copy answer says


def _text(code: Code, body: bytes | None) -> str:
    return f"{code.name}: {body.decode('utf-8', 'replace') if body else ''}"


def with_group(properties: dict[str, str] | None, group: str) -> dict[str, str] | None:
    """The message's properties with its producer group (what brokers' quotas see)."""
    if not group:
        return properties
    return {**properties, PRODUCER_GROUP: group} if properties else {PRODUCER_GROUP: group}


class SendPlan:
    """The attempts of one send. Drive it as::

        plan = SendPlan(fuse, names, options, op, rr)
        while True:
            broker = plan.next()
            ... send to broker: (code, body) or a reason it got no answer ...
            kind, value = plan.answer(code, body, reason)
            "backoff": wait `value` seconds, then go on; "retry": go on at once;
            otherwise return value (a SendResult) or raise value (SendFailed)
    """

    __slots__ = ("fuse", "names", "options", "op", "rr", "tried", "attempt", "broker", "token",
                 "throttled", "refused", "counters", "why", "prefer", "ident", "seqs", "stay",
                 "unanswered", "clock", "deadline")

    def __init__(self, fuse, names: Sequence[str], options: SendOptions, op: Op,
                 rr: itertools.count, counters: SendCounters | None = None,
                 prefer: str | None = None, ident: Idempotence | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`prefer`: the first attempt goes there if the fuse lets it (the sends of one
        turn of a producer's loop go to one broker, in one write: Kafka's sticky
        partitioner); the round robin moves on from turn to turn. `ident`: the
        producer's idempotence (client.idempotence), None for at-least-once sends."""
        self.fuse, self.names, self.options, self.op, self.rr = fuse, names, options, op, rr
        self.counters = counters
        self.prefer = prefer
        self.ident = ident if op in IDEMPOTENT_OPS else None
        self.seqs: dict[str, int] = {}  # broker -> the sequence this send took there
        self.stay: str | None = None  # its answer lost there: it may be stored, retried there
        self.unanswered = 0  # attempts that got no answer after the request was written
        self.clock = clock
        self.deadline = None if options.deadline_s is None else clock() + options.deadline_s
        self.tried: list[str] = []
        self.why: list[str] = []  # per failed attempt, for the trace
        self.attempt = 0
        self.throttled = 0  # attempts answered FLOW_CONTROL
        self.refused = 0  # attempts answered NO_PERMISSION
        self.broker = ""
        self.token = None

    def next(self) -> str:
        """The broker for the next attempt (its fuse call begins now)."""
        if self.stay is not None:
            candidates = [self.stay]
        else:
            candidates = [b for b in self.names if b not in self.tried] or self.names
        self.attempt += 1
        prefer, self.prefer = self.prefer, None
        if self.fuse is not None:
            self.broker = self.fuse.choose(candidates, prefer)
            self.token = self.fuse.begin(self.broker)
        elif prefer in candidates:
            self.broker = prefer
        else:
            self.broker = candidates[next(self.rr) % len(candidates)]
        return self.broker

    def frame(self, payload: bytes) -> tuple[int, bytes]:
        """(frame flags, body) of this attempt: an idempotent send's carries its producer
        id and the sequence it took at this broker (the same on every retry there)."""
        if self.ident is None:
            return 0, payload
        flags, body, self.seqs[self.broker] = self.ident.frame(
            self.broker, self.op, payload, self.seqs.get(self.broker))
        return flags, body

    def answer(self, code: Code | None, body: bytes | None, reason: str = "",
               closing: bool = False, written: bool = True) -> tuple[str, object]:
        """The attempt's outcome: ("ok", SendResult), ("fail", SendFailed) or
        ("retry", why); reports the call to the fuse. `written`: False when the request
        never left (no connection): nothing can have been stored."""
        if self.ident is not None and ((code is None and written)
                                       or code == Code.UNACKNOWLEDGED):
            # it may be stored there: a master that lost its role after storing it, its
            # slave promoted with it or without
            return self._unanswered(reason or _text(code, body), closing, code)
        if code == Code.FLOW_CONTROL:
            return self._throttled(body, closing)
        if code == Code.NO_PERMISSION:
            return self._refused(body, closing)
        # NOT_MASTER: this client's routes are ahead of (or behind) the broker's own role
        # in a failover; the broker is well. Held against it, the group stayed out for its
        # minute after its slave had taken over (the routes moved before the promotion)
        broker, broker_ok = self.broker, code is not None and (
            code not in RETRYABLE or code in (Code.NOT_MASTER, Code.UNACKNOWLEDGED))
        broker_ok = broker_ok and (code == Code.OK or code not in STORED)
        if code in STORED:
            try:
                result = self._result(code, body)
            except BrokerError as exc:
                self._end(False, why=f"bad response: {exc}")
                return "fail", SendFailed(f"{broker}: bad response: {exc}")
            first = result[0] if type(result) is list else result  # SEND_MULTI: a list
            self._end(broker_ok, first.broker_s, "" if broker_ok else stored_short(code))
            return "ok", result
        why = reason or f"{code.name}: {body.decode('utf-8', 'replace') if body else ''}"
        self._end(broker_ok, why=why)
        if code is not None and code not in RETRYABLE:
            message = body.decode("utf-8", "replace") if body else code.name
            return "fail", SendFailed(f"{broker}: {code.name}: {message}", code,
                                      tuple(self.why))
        self.why.append(f"{broker}: {why}")
        self.tried.append(broker)
        wait = self._interval(self.attempt - self.throttled)
        if self.stay is not None:  # (it may be stored there: spaced as a lost answer is)
            wait = max(wait, SAME_GROUP_BACKOFF_S[min(self.unanswered, 4) - 1])
        elif self.deadline is not None and len(self.tried) % len(self.names) == 0:
            rounds = len(self.tried) // len(self.names)  # every broker asked: round again
            wait = max(wait, ROUND_BACKOFF_S[min(rounds, len(ROUND_BACKOFF_S)) - 1])
        wait = self._next_wait(closing, wait)
        if wait is None:
            return "fail", SendFailed(
                f"send failed after {self.attempt} attempt(s); last from {broker}: {why}", code,
                tuple(self.why))
        return ("backoff", wait) if wait else ("retry", why)

    def _next_wait(self, closing: bool, wait: float) -> float | None:
        """The wait before the next attempt, or None when the budget is spent: with a
        deadline, one passed (a wait past it is cut short: a last attempt just before it,
        the one a failover finished meanwhile answers); else 1 + `retries` attempts made
        (those throttled or refused apart)."""
        if closing:
            return None
        if self.deadline is not None:
            left = self.deadline - self.clock() - LAST_ATTEMPT_S
            return None if left <= 0 else min(wait, left)
        if self.attempt - self.throttled - self.refused > self.options.retries:
            return None
        return wait

    def _unanswered(self, reason: str, closing: bool, code: Code | None = None
                    ) -> tuple[str, object]:
        """No answer to a written idempotent send: it may be stored there, and only there
        would a retry be known for one; so it stays with that broker (its group: routes
        follow a failover), spaced by SAME_GROUP_BACKOFF_S, until its attempts run out.
        At least once would store it elsewhere, and twice if the first had landed."""
        broker = self.broker
        healthy = code is not None  # (UNACKNOWLEDGED: a failover's answer, not a fault)
        self._end(healthy, why="" if healthy else reason)
        self.why.append(f"{broker}: {reason}")
        self.stay = broker
        self.unanswered += 1
        waits = SAME_GROUP_BACKOFF_S
        wait = self._next_wait(closing, waits[min(self.unanswered, len(waits)) - 1])
        if wait is None:
            return "fail", SendFailed(
                f"send failed after {self.attempt} attempt(s); last from {broker}: {reason}; "
                f"it may be stored on {broker}: not sent elsewhere, where it would be a "
                "duplicate", code, tuple(self.why))
        return "backoff", wait

    def unauthenticated(self, exc: BrokerError) -> SendFailed:
        """The broker refused this client's credentials (acl.handshake.AuthFailed): the
        broker is well (its fuse call ends ok) and no other would take them either, so the
        send fails now, saying why."""
        self._end(True)
        return Unauthenticated(str(exc), None, (*self.why, f"{self.broker}: {exc}"))

    def _refused(self, body: bytes | None, closing: bool) -> tuple[str, object]:
        """NO_PERMISSION: the broker is well and takes no writes for this topic (its
        writes wiped for maintenance, or the topic read-only there): the next broker
        not asked yet, at once and without spending a retry; failing when none is left."""
        self._end(True)
        self.refused += 1
        why = body.decode("utf-8", "replace") if body else "no permission"
        self.why.append(f"{self.broker}: NO_PERMISSION: {why}")
        self.tried.append(self.broker)
        if closing or self.stay is not None or all(b in self.tried for b in self.names):
            return "fail", SendFailed("no broker takes this send: " + "; ".join(self.why),
                                      Code.NO_PERMISSION, tuple(self.why))
        return "retry", why

    def _interval(self, retry: int) -> float:
        """The configured interval before the `retry`-th retry (1-based); 0 if none."""
        backoff = self.options.backoff
        return backoff[min(retry, len(backoff)) - 1] if backoff else 0.0

    def _throttled(self, body: bytes | None, closing: bool) -> tuple[str, object]:
        """FLOW_CONTROL: the broker is well and protecting its capacity; wait, then again."""
        self._end(True)
        self.throttled += 1
        try:
            hint, why = decode_flow_control(body or b"")
        except ProtocolError:
            hint, why = DEFAULT_HINT_S, "over quota"
        counters = self.counters
        if counters is not None:
            counters.add("flow_control")
        if self.throttled > self.options.flow_retries or closing:
            if counters is not None:
                counters.add("flow_control_gave_up")
            return "fail", SendFailed(f"{self.broker}: FLOW_CONTROL: {why} (gave up after "
                                      f"{self.throttled} throttled attempt(s))", Code.FLOW_CONTROL)
        # up to twice the hint, at random: the sends refused together must not all come
        # back in the same millisecond for the same few tokens
        # and at least a floor that doubles with each refusal of the same send: a flood
        # of refused sends must not turn into a storm of retries at the broker
        floor = FLOW_BACKOFF_FLOOR_S * 2 ** (self.throttled - 1)
        wait = min(MAX_BACKOFF_S, max(hint * (1.0 + random.random()), floor,
                                      self._interval(self.throttled)))
        if counters is not None:
            counters.add("backoff_s", wait)
        return "backoff", wait

    def _result(self, code: Code, body: bytes | None) -> SendResult:
        status = "SEND_OK" if code == Code.OK else code.name
        if self.op == Op.SEND:
            qid, qoff, phys, ts, broker_s, host = decode_send_answer(body)
            return SendResult(status, self.broker, qid, qoff, 1, self.attempt, broker_s,
                              encode_id(host, phys) if host else None, tuple(self.why), ts)
        if self.op == Op.SEND_MULTI:  # one result a message, in the order sent
            qid, first, ms, host, offsets, broker_s = decode_multi_answer(body)
            why = tuple(self.why)
            return [SendResult(status, self.broker, qid, first + i, 1, self.attempt, broker_s,
                               encode_id(host, phys), why, ms)
                    for i, phys in enumerate(offsets)]
        qid, first, count, broker_s = decode_batch_response(body)
        return SendResult(status, self.broker, qid, first, count, self.attempt, broker_s,
                          None, tuple(self.why))

    def _end(self, ok: bool, broker_s: float | None = None, why: str = "") -> None:
        if self.token is not None:
            self.fuse.end(self.token, ok=ok, broker_s=broker_s, why=why)
            self.token = None
