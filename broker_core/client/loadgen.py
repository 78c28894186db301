"""The load generator behind `floodgate bench produce` and `floodgate demo`.

`run()` paces sends (a fixed rate, or as fast as the window allows) with at
most `concurrency` in flight and records each call's client-side RT into a
LatencyHistogram; it stops after `count` messages or `duration` seconds.

The sends go through an `AsyncProducer` configured like the given `Producer`
(same brokers, the very same fuse, timeout and retries) on an event loop in
the calling thread: one thread does all the I/O. The threaded producer's
per-connection readers fought over the GIL and topped out near 2.7 k msgs/s
over six brokers on two cores, the asyncio path near 14 k.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from broker_core.acl.handshake import AuthFailed
from broker_core.client.attempts import MAX_BACKOFF_S, Unauthenticated
from broker_core.client.producer import Producer, SendFailed
from heatmap import LatencyHistogram

log = logging.getLogger("floodgate.loadgen")

MIN_SLEEP_S = 0.004
# a stamped body's first bytes: the wall-clock time (epoch s) the generator sent it, so a
# consumer on the same host reads how long the message took to reach it (`sent_at`)
STAMP = struct.Struct(">d")


def sent_at(body: bytes) -> float | None:
    """A stamped body's send time (epoch s), or None when it carries none."""
    if len(body) < STAMP.size:
        return None
    (t,) = STAMP.unpack_from(body)
    return t if 1e9 < t < 1e11 else None  # a plausible epoch: the bytes were a stamp


@dataclass
class LoadSpec:
    topic: str = "bench"  # or several, comma-separated: sends go to each in turn
    size: int = 128
    count: int | None = None
    duration: float | None = None
    rate: float | None = None  # messages per second; None = as fast as possible
    batch: int = 1
    concurrency: int = 64
    key_prefix: str = ""  # each message keyed f"{key_prefix}{n}" (the key index), n from 1
    start_at: float | None = None  # wall clock: connected before, the first send then
    stamp: bool = False  # each body starts with its send time (STAMP), for send -> consumer
    linger_s: float = 0.0  # a send waits this long for others to share its frame
    frame_msgs: int = 64  # ... and a frame leaves once it holds this many


@dataclass
class LoadResult:
    acked: int = 0
    errors: int = 0
    seconds: float = 0.0
    rt: LatencyHistogram = field(default_factory=LatencyHistogram)
    error_reasons: dict[str, int] = field(default_factory=dict)
    # the first failure of each reason in full: NOT_MASTER alone did not say who is
    error_examples: dict[str, str] = field(default_factory=dict)
    # attempts given up and sent again elsewhere, by why (a send that then succeeded is
    # acked, but its broker was judged by the fuse: this says what the fuse heard)
    retry_reasons: dict[str, int] = field(default_factory=dict)
    # acked but not SEND_OK, by status: stored, yet not as the broker's policy promises
    # (SLAVE_NOT_AVAILABLE: on its master alone, a failover now would lose them)
    degraded: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        h = self.rt
        return {
            "acked": self.acked,
            "errors": self.errors,
            "seconds": self.seconds,
            "tps": self.acked / self.seconds if self.seconds else 0.0,
            **h.summary(suffix="_s"),
            "error_reasons": dict(sorted(self.error_reasons.items(), key=lambda kv: -kv[1])[:10]),
            "error_examples": {r: self.error_examples[r] for r in self.error_reasons
                               if r in self.error_examples},
            "retry_reasons": dict(sorted(self.retry_reasons.items(), key=lambda kv: -kv[1])[:10]),
            "degraded": dict(sorted(self.degraded.items(), key=lambda kv: -kv[1])),
        }


def retry_reason(why: str) -> str:
    """The kind of a retried attempt's reason ("group-4: SYSTEM_BUSY: write path busy:
    ..." -> "SYSTEM_BUSY"; "...: no answer in 3 s" -> "timeout")."""
    _broker, _, rest = why.partition(": ")
    head = rest.split(":", 1)[0].strip()
    if head.isupper():
        return head
    return "timeout" if "no answer" in rest else head[:40] or "unknown"


def failure_reason(exc: BaseException) -> str:
    """What a failed send's summary counts it under: the broker's code, else the last
    attempt's reason in words (an HTTP port given for a data port, a refused connection)
    without the brokers' addresses, else the exception's class."""
    if isinstance(exc, SendFailed) and exc.code:
        return exc.code.name
    text = exc.retries[-1] if isinstance(exc, SendFailed) and exc.retries else str(exc)
    if not text:
        return type(exc).__name__
    # "127.0.0.1:10911: 127.0.0.1:10911: bad frame from broker: why" -> "why"
    parts = [p for p in text.split(": ") if p and not p[0].isdigit()]
    text = ": ".join(parts).removeprefix("bad frame from broker: ")
    return text[:160] or type(exc).__name__


RECENT_MAX_S = 60  # the longest window `recent_summary` answers for


class LoadGenerator:
    def __init__(self, producer: Producer, spec: LoadSpec) -> None:
        if spec.count is None and spec.duration is None:
            raise ValueError("give a count or a duration")
        self.producer, self.spec = producer, spec
        self.result = LoadResult()
        self.lock = threading.Lock()
        # per wall-clock second of answers: [second, its RTs, ok, failed] (the producer's
        # /stats summarises the last ten: a walk over 10,000 sends held the lock ms a poll)
        self.seconds: deque[list] = deque(maxlen=RECENT_MAX_S + 1)
        self._stop = threading.Event()
        self.started = 0.0  # wall clock, once running

    def stop(self) -> None:
        self._stop.set()

    def _record(self, rt: float, n: int, exc: BaseException | None, result=None) -> None:
        retries = result.retries if result is not None else getattr(exc, "retries", ())
        with self.lock:
            for why in retries:
                reason = retry_reason(why)
                self.result.retry_reasons[reason] = self.result.retry_reasons.get(reason, 0) + 1
            self.result.rt.record(rt)
            second = int(time.time())
            last = self.seconds[-1] if self.seconds else None
            if last is None or last[0] != second:
                last = [second, LatencyHistogram(), 0, 0]
                self.seconds.append(last)
            last[1].record(rt)
            last[2 if exc is None else 3] += 1
            if exc is None:
                self.result.acked += n
                status = getattr(result, "status", "SEND_OK")
                if status != "SEND_OK":
                    self.result.degraded[status] = self.result.degraded.get(status, 0) + n
            else:
                self.result.errors += n
                reason = failure_reason(exc)
                self.result.error_reasons[reason] = self.result.error_reasons.get(reason, 0) + n
                self.result.error_examples.setdefault(reason, str(exc)[:300])

    def run(self) -> LoadResult:
        gc.collect()
        gc.freeze()  # a full collection walking start-up's objects held the loop 20-30 ms
        try:
            import uvloop
        except ImportError:
            return asyncio.run(self._run())
        return uvloop.run(self._run())

    async def _run(self) -> LoadResult:
        from broker_core.client.aio_producer import AsyncProducer

        spec, base = self.spec, self.producer
        opts = base.options
        aio = AsyncProducer(base.brokers, fuse=base.fuse or False, timeout=base.timeout,
                            retries=opts.retries, routes=base.routes, group=opts.group,
                            flow_retries=opts.flow_retries, backoff=opts.backoff,
                            counters=base.counters, tracer=getattr(base, "tracer", None),
                            linger_s=spec.linger_s, frame_msgs=spec.frame_msgs,
                            idempotent=base.idempotence is not None,
                            deadline_s=opts.deadline_s)
        body = b"x" * spec.size
        prefix = spec.key_prefix
        topics = spec.topic.split(",")
        inflight = 0
        room = asyncio.Event()  # set while fewer than `concurrency` sends are in flight
        room.set()
        drained = asyncio.Event()
        perf = time.perf_counter

        def sent(n: int, t0: float):
            def done(result, exc) -> None:
                nonlocal inflight
                self._record(perf() - t0, n, exc, result)
                if isinstance(exc, Unauthenticated):  # no send will pass: the run ends
                    self._stop.set()
                inflight -= 1
                room.set()
                if not inflight:
                    drained.set()
            return done

        for name, exc in (await aio.connect()).items():
            if not isinstance(exc, AuthFailed):  # that one the first send says, and stops
                log.warning("load: %s not connected before the load began: %s", name, exc)
        while spec.start_at is not None and not self._stop.is_set() \
                and (wait := spec.start_at - time.time()) > 0:
            await asyncio.sleep(min(wait, 0.1))  # a stop meanwhile is seen within 0.1 s
        start = perf()
        self.started = time.time()
        end = start + spec.duration if spec.duration is not None else None
        interval = spec.batch / spec.rate if spec.rate else 0.0
        sent_n = 0
        while not self._stop.is_set():
            if spec.count is not None and sent_n >= spec.count:
                break
            now = perf()
            if end is not None and now >= end:
                break
            if interval:
                due = start + (sent_n / spec.batch) * interval
                if due > now:
                    # uvloop's timers count whole milliseconds: a shorter sleep returns at
                    # once and the loop spins a core; wake at most every ms and send what
                    # fell due meanwhile
                    await asyncio.sleep(min(max(due - now, MIN_SLEEP_S), 0.05))
                    continue
            if inflight >= spec.concurrency:
                room.clear()
                await room.wait()
                continue
            n = spec.batch if spec.count is None else min(spec.batch, spec.count - sent_n)
            inflight += 1
            drained.clear()
            seq = sent_n + 1
            if spec.stamp:
                body = STAMP.pack(time.time()) + body[STAMP.size:]
            topic = topics[seq % len(topics)]
            if n == 1:
                aio.send_nowait(topic, body, sent(1, now),
                                keys=f"{prefix}{seq}" if prefix else None)
            else:
                self._batch(aio, topic, [body] * n, sent(n, now))
            sent_n += n
            if sent_n % 32 == 0:
                await asyncio.sleep(0)  # let answers in while catching up with the schedule
        if inflight:
            try:
                await asyncio.wait_for(drained.wait(), max(
                    opts.deadline_s or 0.0, base.timeout * (opts.retries + 2))
                    + opts.flow_retries * MAX_BACKOFF_S)
            except TimeoutError:
                pass
        await aio.close()
        self.result.seconds = perf() - start
        return self.result

    @staticmethod
    def _batch(aio, topic: str, bodies: list[bytes], done) -> None:
        """A batch send (rare: a coroutine is fine) reporting to `done` as one send does."""
        async def run() -> None:
            try:
                result = await aio.send_batch(topic, bodies)
            except Exception as exc:  # noqa: BLE001 - counted by reason
                done(None, exc)
            else:
                done(result, None)
        asyncio.ensure_future(run())

    def recent_summary(self, seconds: float = 10.0) -> dict:
        """RT and outcome of the last `seconds`, for the producer's /stats; `rate` is
        messages answered a second over them, `target_rate` what the load offers."""
        now = time.time()
        seconds = max(1e-3, min(seconds, now - self.started, RECENT_MAX_S)) if self.started \
            else min(seconds, RECENT_MAX_S)
        # the whole seconds in the window and this one so far (under a second: this one)
        first = int(now - seconds) + 1 if seconds >= 1 else int(now)
        seconds = max(1e-3, now - first)
        h, ok, err = LatencyHistogram(), 0, 0
        with self.lock:  # the sends' own thread records through it: copies only
            window = [(hist.copy(), good, bad) for second, hist, good, bad in self.seconds
                      if second >= first]
            totals = {"acked": self.result.acked, "errors": self.result.errors,
                      "error_reasons": dict(self.result.error_reasons),
                      "retry_reasons": dict(self.result.retry_reasons)}
        for hist, good, bad in window:
            h.merge(hist)
            ok += good
            err += bad
        return {
            "totals": totals,
            "target_rate": self.spec.rate,  # None: flat out
            "started": self.started,
            "rate": (ok + err) * self.spec.batch / seconds,
            "window_s": seconds,
            "sends": ok + err,
            "errors": err,
            "p50_s": h.quantile(0.5),
            "p99_s": h.quantile(0.99),
            "max_s": h.max,
        }
