"""Producer and consumer clients.

`Producer` switches broker on every send (seed 003) through a `fuse.Fuse`
(on by default), records each call's RT and outcome into it, and retries a
failed send on another broker. `send` blocks; `send_async` returns a
`concurrent.futures.Future` that asyncio code awaits with
`asyncio.wrap_future` — one implementation serves both.

`Consumer` pulls in clustering mode: the members of a group split the queues
evenly (sorted members x sorted queues, as RocketMQ's averaging allocation),
offsets are committed to the brokers, delivery is at-least-once.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from broker_core.connection import BrokerUnavailable, Connection, is_local
from broker_core.errors import BrokerError
from broker_core.protocol import (
    Code,
    Op,
    OutMessage,
    decode_batch_response,
    decode_send_response,
    encode_send,
    encode_send_batch,
)

SWEEP_S = 0.02  # timeouts and the fuse's in-flight judgement, every 20 ms

# Codes after which another broker may succeed; the others are the caller's fault.
RETRYABLE = {Code.SYSTEM_BUSY, Code.SYSTEM_ERROR, Code.SERVICE_NOT_AVAILABLE, Code.DISK_FULL}


class SendFailed(BrokerError):
    """Every attempt failed; `code` is the last broker answer (None: no answer)."""

    def __init__(self, message: str, code: Code | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class SendResult:
    status: str  # SEND_OK, or FLUSH_DISK_TIMEOUT (stored, not yet on disk)
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


def ensure_topic(brokers: Sequence[str] | Mapping[str, str] | str, topic: str,
                 timeout: float = 5.0) -> dict[str, int]:
    """Create `topic` on every broker now (ROUTE with create), so the first sends
    do not pay for its files; broker name -> its queues."""
    from broker_core.protocol import decode_json, encode_json

    out = {}
    for name, addr in normalize_brokers(brokers).items():
        conn = Connection(addr)
        try:
            code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": True}),
                                   timeout)
        finally:
            conn.close()
        if code != Code.OK:
            raise BrokerError(f"{name}: cannot create topic {topic!r}: "
                              f"{body.decode('utf-8', 'replace')}")
        out[name] = int(decode_json(body)["queues"])
    return out


def judge_attempt(fuse, retries: int, closing: bool, op: Op, broker: str, token,
                  attempt: int, code: Code | None, body: bytes | None, reason: str
                  ) -> tuple[str, object]:
    """One attempt's outcome: ("ok", SendResult), ("fail", SendFailed) or ("retry", why).

    Reports the call to the fuse: a broker that answered with a client-side
    error (too large, bad request) is healthy; one that timed out, refused or
    failed to flush is not. Shared by the threaded and the asyncio producer.
    """
    broker_ok = code is not None and code not in RETRYABLE and code != Code.FLUSH_DISK_TIMEOUT
    if code in (Code.OK, Code.FLUSH_DISK_TIMEOUT):
        status = "SEND_OK" if code == Code.OK else "FLUSH_DISK_TIMEOUT"
        try:
            if op == Op.SEND:
                qid, qoff, _phys, _ts, broker_s = decode_send_response(body)
                result = SendResult(status, broker, qid, qoff, 1, attempt, broker_s)
            else:
                qid, first, count, broker_s = decode_batch_response(body)
                result = SendResult(status, broker, qid, first, count, attempt, broker_s)
        except BrokerError as exc:
            if token is not None:
                fuse.end(token, ok=False)
            return "fail", SendFailed(f"{broker}: bad response: {exc}")
        if token is not None:
            fuse.end(token, ok=broker_ok, broker_s=broker_s)
        return "ok", result
    if token is not None:
        fuse.end(token, ok=broker_ok)
    if code is not None and code not in RETRYABLE:
        message = body.decode("utf-8", "replace") if body else code.name
        return "fail", SendFailed(f"{broker}: {code.name}: {message}", code)
    why = reason or f"{code.name}: {body.decode('utf-8', 'replace') if body else ''}"
    if attempt > retries or closing:
        return "fail", SendFailed(
            f"send failed after {attempt} attempt(s); last from {broker}: {why}", code)
    return "retry", why


def _one(topic: str, body: bytes, tags, keys, properties) -> bytes:
    return encode_send(topic, -1, OutMessage(body, tags or "", keys or "", properties or {}))


class _Pool:
    """One lazily opened Connection per broker."""

    def __init__(self, brokers: Mapping[str, str]) -> None:
        self.addrs = dict(brokers)
        self._conns: dict[str, Connection] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Connection:
        conn = self._conns.get(name)
        if conn is None:
            with self._lock:
                conn = self._conns.setdefault(name, Connection(self.addrs[name]))
        return conn

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()


class Producer:
    def __init__(
        self,
        brokers: Sequence[str] | Mapping[str, str] | str,
        fuse=None,
        timeout: float = 3.0,
        retries: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.brokers = normalize_brokers(brokers)
        if fuse is None:
            from fuse import Fuse

            fuse = Fuse(list(self.brokers), clock=clock,
                        colocated=[b for b, addr in self.brokers.items() if is_local(addr)])
        self.fuse = fuse or None  # fuse=False: plain round robin
        self.timeout = timeout
        self.retries = retries
        self._clock = clock
        self._pool = _Pool(self.brokers)
        self._rr = itertools.count()
        self._names = list(self.brokers)
        self._deadlines: dict[Future, tuple[float, Connection]] = {}
        self._dl_lock = threading.Lock()
        self._closed = threading.Event()
        self._sweeper: threading.Thread | None = None  # started by the first send

    # -- public API ---------------------------------------------------------
    def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
             properties: dict[str, str] | None = None) -> SendResult:
        """Send one message, retrying on other brokers; raises SendFailed."""
        return self._call(Op.SEND, _one(topic, body, tags, keys, properties))

    def send_async(self, topic: str, body: bytes, tags: str | None = None,
                   keys: str | None = None, properties: dict[str, str] | None = None) -> Future:
        """As send, without blocking: a Future of the SendResult."""
        outer: Future = Future()
        self._attempt(Op.SEND, _one(topic, body, tags, keys, properties), outer, [], 1)
        return outer

    def send_batch(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> SendResult:
        msgs = [b if isinstance(b, OutMessage) else OutMessage(b) for b in bodies]
        return self._call(Op.SEND_BATCH, encode_send_batch(topic, -1, msgs))

    def send_batch_async(self, topic: str, bodies: Sequence[bytes | OutMessage]) -> Future:
        msgs = [b if isinstance(b, OutMessage) else OutMessage(b) for b in bodies]
        outer: Future = Future()
        self._attempt(Op.SEND_BATCH, encode_send_batch(topic, -1, msgs), outer, [], 1)
        return outer

    def send_oneway(self, topic: str, body: bytes, tags: str | None = None) -> None:
        """Fire and forget: no answer, no retry, nothing reported to the fuse."""
        broker = self._choose(self._names)
        try:
            self._pool.get(broker).request(
                Op.SEND, encode_send(topic, -1, OutMessage(body, tags or "")), oneway=True
            )
        except BrokerUnavailable:
            pass

    def close(self) -> None:
        self._closed.set()
        self._pool.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- attempts -----------------------------------------------------------
    def _start_sweeper(self) -> None:
        with self._dl_lock:
            if self._sweeper is None and not self._closed.is_set():
                self._sweeper = threading.Thread(
                    target=self._sweep, daemon=True, name="floodgate-producer-timeouts")
                self._sweeper.start()

    def _choose(self, candidates: list[str]) -> str:
        if self._sweeper is None:
            self._start_sweeper()
        if self.fuse is not None:
            return self.fuse.choose(candidates)
        return candidates[next(self._rr) % len(candidates)]

    def _attempt(
        self, op: Op, payload: bytes, outer: Future, tried: list[str], attempt: int
    ) -> None:
        candidates = [b for b in self._names if b not in tried] or self._names
        broker = self._choose(candidates)
        token = self.fuse.begin(broker) if self.fuse is not None else None
        try:
            conn = self._pool.get(broker)
            fut = conn.request(op, payload)
        except BrokerUnavailable as exc:
            self._done(op, payload, outer, tried, attempt, broker, token, None, None, str(exc))
            return
        with self._dl_lock:
            self._deadlines[fut] = (self._clock() + self.timeout, conn)
        fut.add_done_callback(
            lambda f: self._on_response(f, op, payload, outer, tried, attempt, broker, token)
        )

    def _on_response(self, fut: Future, op, payload, outer, tried, attempt, broker, token):
        with self._dl_lock:
            self._deadlines.pop(fut, None)
        try:
            code, body = fut.result()
        except Exception as exc:  # noqa: BLE001 - BrokerUnavailable or timeout
            self._done(op, payload, outer, tried, attempt, broker, token, None, None, str(exc))
            return
        self._done(op, payload, outer, tried, attempt, broker, token, Code(code), body, "")

    def _judge(self, op, broker, token, attempt, code: Code | None, body: bytes | None,
               reason: str) -> tuple[str, object]:
        return judge_attempt(self.fuse, self.retries, self._closed.is_set(), op, broker, token,
                             attempt, code, body, reason)

    def _done(self, op, payload, outer: Future, tried, attempt, broker, token,
              code: Code | None, body: bytes | None, reason: str) -> None:
        kind, value = self._judge(op, broker, token, attempt, code, body, reason)
        if kind == "ok":
            outer.set_result(value)
        elif kind == "fail":
            outer.set_exception(value)
        else:
            self._attempt(op, payload, outer, tried + [broker], attempt + 1)

    def _call(self, op: Op, payload: bytes) -> SendResult:
        """The blocking path: the same attempts as _attempt, without callbacks,
        an outer future or the timeout sweeper (a sync send waits itself)."""
        tried: list[str] = []
        attempt = 1
        while True:
            candidates = [b for b in self._names if b not in tried] or self._names
            broker = self._choose(candidates)
            token = self.fuse.begin(broker) if self.fuse is not None else None
            code = body = None
            reason = ""
            try:
                raw_code, body = self._pool.get(broker).call(op, payload, self.timeout)
                code = Code(raw_code)
            except (BrokerUnavailable, TimeoutError) as exc:
                reason = str(exc)
            kind, value = self._judge(op, broker, token, attempt, code, body, reason)
            if kind == "ok":
                return value
            if kind == "fail":
                raise value
            tried.append(broker)
            attempt += 1

    def _sweep(self) -> None:
        """Fail requests past their deadline and tick the fuse (one thread for all).

        Its wake-ups are also the producer's heartbeat: when this thread runs
        late, so do the threads reading answers (same GIL, same cores), and the
        fuse does not hold that time against the brokers (fuse.lateness).
        """
        while not self._closed.wait(SWEEP_S):
            if self.fuse is not None:
                self.fuse.heartbeat(SWEEP_S)
                # judge calls still in flight: a broker stuck on a call is slow now,
                # not when (if ever) the call returns
                self.fuse.tick()
            now = self._clock()
            with self._dl_lock:
                late = [(f, c) for f, (d, c) in self._deadlines.items() if d <= now]
                for f, _ in late:
                    del self._deadlines[f]
            for fut, conn in late:
                conn.forget(fut)
                if not fut.done():
                    try:
                        fut.set_exception(
                            TimeoutError(f"{conn.addr}: no answer in {self.timeout:g} s")
                        )
                    except Exception:  # noqa: BLE001 - answered at the same moment
                        pass
