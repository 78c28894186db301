"""The load generator behind `floodgate bench produce` and `floodgate demo`.

One thread paces `send_async` calls (a fixed rate, or as fast as the window
allows) with at most `concurrency` requests in flight; completions record the
client-side RT into a LatencyHistogram. Stops after `count` messages or
`duration` seconds, whichever is given.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from broker_core.client import Producer, SendFailed
from heatmap import LatencyHistogram


@dataclass
class LoadSpec:
    topic: str = "bench"
    size: int = 128
    count: int | None = None
    duration: float | None = None
    rate: float | None = None  # messages per second; None = as fast as possible
    batch: int = 1
    concurrency: int = 64


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

    def _done(self, fut, t0: float, n: int) -> None:
        rt = time.perf_counter() - t0
        exc = fut.exception()
        with self.lock:
            self.result.rt.record(rt)
            self.recent.append((time.time(), rt, exc is None))
            if exc is None:
                self.result.acked += n
            else:
                self.result.errors += n
                reason = (
                    str(exc.code.name)
                    if isinstance(exc, SendFailed) and exc.code
                    else type(exc).__name__
                )
                self.result.error_reasons[reason] = self.result.error_reasons.get(reason, 0) + n
        self._window.release()

    def run(self) -> LoadResult:
        spec = self.spec
        body = b"x" * spec.size
        self._window = threading.BoundedSemaphore(spec.concurrency)
        start = time.perf_counter()
        end = start + spec.duration if spec.duration is not None else None
        sent = 0
        interval = spec.batch / spec.rate if spec.rate else 0.0
        while not self._stop.is_set():
            if spec.count is not None and sent >= spec.count:
                break
            now = time.perf_counter()
            if end is not None and now >= end:
                break
            if interval:
                due = start + (sent / spec.batch) * interval
                if due > now:
                    time.sleep(min(due - now, 0.05))
                    continue
            if not self._window.acquire(timeout=0.1):
                continue
            n = spec.batch if spec.count is None else min(spec.batch, spec.count - sent)
            t0 = time.perf_counter()
            if n == 1:
                fut = self.producer.send_async(spec.topic, body)
            else:
                fut = self.producer.send_batch_async(spec.topic, [body] * n)
            fut.add_done_callback(lambda f, t0=t0, n=n: self._done(f, t0, n))
            sent += n
        for _ in range(spec.concurrency):  # wait for what is in flight
            self._window.acquire(timeout=self.producer.timeout * (self.producer.retries + 2))
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
