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
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from broker_core.client.attempts import MAX_BACKOFF_S
from broker_core.client.producer import Producer, SendFailed
from heatmap import LatencyHistogram

MIN_SLEEP_S = 0.001


@dataclass
class LoadSpec:
    topic: str = "bench"
    size: int = 128
    count: int | None = None
    duration: float | None = None
    rate: float | None = None  # messages per second; None = as fast as possible
    batch: int = 1
    concurrency: int = 64
    key_prefix: str = ""  # each message keyed f"{key_prefix}{n}" (the key index), n from 1


@dataclass
class LoadResult:
    acked: int = 0
    errors: int = 0
    seconds: float = 0.0
    rt: LatencyHistogram = field(default_factory=LatencyHistogram)
    error_reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        h = self.rt
        return {
            "acked": self.acked,
            "errors": self.errors,
            "seconds": self.seconds,
            "tps": self.acked / self.seconds if self.seconds else 0.0,
            "p50_s": h.quantile(0.5),
            "p99_s": h.quantile(0.99),
            "p999_s": h.quantile(0.999),
            "max_s": h.max,
            "mean_s": h.mean,
            "error_reasons": dict(sorted(self.error_reasons.items(), key=lambda kv: -kv[1])[:10]),
        }


class LoadGenerator:
    def __init__(self, producer: Producer, spec: LoadSpec) -> None:
        if spec.count is None and spec.duration is None:
            raise ValueError("give a count or a duration")
        self.producer, self.spec = producer, spec
        self.result = LoadResult()
        self.lock = threading.Lock()
        self.recent: deque[tuple[float, float, bool]] = deque(maxlen=200_000)  # (t, rt, ok)
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def _record(self, rt: float, n: int, exc: BaseException | None) -> None:
        with self.lock:
            self.result.rt.record(rt)
            self.recent.append((time.time(), rt, exc is None))
            if exc is None:
                self.result.acked += n
            else:
                self.result.errors += n
                reason = str(exc.code.name) if isinstance(exc, SendFailed) and exc.code else \
                    type(exc).__name__
                self.result.error_reasons[reason] = self.result.error_reasons.get(reason, 0) + n

    def run(self) -> LoadResult:
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
                            counters=base.counters, tracer=getattr(base, "tracer", None))
        body = b"x" * spec.size
        window = asyncio.Semaphore(spec.concurrency)
        pending: set[asyncio.Task] = set()

        prefix = spec.key_prefix

        async def one(n: int, seq: int) -> None:
            t0 = time.perf_counter()
            exc = None
            try:
                if n == 1:
                    await aio.send(spec.topic, body, keys=f"{prefix}{seq}" if prefix else None)
                else:
                    await aio.send_batch(spec.topic, [body] * n)
            except Exception as e:  # noqa: BLE001 - counted by reason
                exc = e
            self._record(time.perf_counter() - t0, n, exc)
            window.release()

        start = time.perf_counter()
        end = start + spec.duration if spec.duration is not None else None
        interval = spec.batch / spec.rate if spec.rate else 0.0
        sent = 0
        while not self._stop.is_set():
            if spec.count is not None and sent >= spec.count:
                break
            now = time.perf_counter()
            if end is not None and now >= end:
                break
            if interval:
                due = start + (sent / spec.batch) * interval
                if due > now:
                    # uvloop's timers count whole milliseconds: a shorter sleep returns at
                    # once and the loop spins a core; wake at most every ms and send what
                    # fell due meanwhile
                    await asyncio.sleep(min(max(due - now, MIN_SLEEP_S), 0.05))
                    continue
            await window.acquire()
            n = spec.batch if spec.count is None else min(spec.batch, spec.count - sent)
            task = asyncio.ensure_future(one(n, sent + 1))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += n
            if sent % 32 == 0:
                await asyncio.sleep(0)  # let answers in while catching up with the schedule
        if pending:
            await asyncio.wait(pending, timeout=base.timeout * (opts.retries + 2)
                               + opts.flow_retries * MAX_BACKOFF_S)
        await aio.close()
        self.result.seconds = time.perf_counter() - start
        return self.result

    def recent_summary(self, seconds: float = 10.0) -> dict:
        """RT and outcome of the last `seconds`, for the producer's /stats."""
        cutoff = time.time() - seconds
        h = LatencyHistogram()
        ok = err = 0
        with self.lock:
            for t, rt, good in reversed(self.recent):
                if t < cutoff:
                    break
                h.record(rt)
                ok += good
                err += not good
            totals = {"acked": self.result.acked, "errors": self.result.errors}
        return {
            "totals": totals,
            "window_s": seconds,
            "sends": ok + err,
            "errors": err,
            "p50_s": h.quantile(0.5),
            "p99_s": h.quantile(0.99),
            "max_s": h.max,
        }
