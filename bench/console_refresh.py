"""The console fed 200 brokers' recorded /stats at a 1 s refresh.

Measures, with the real App in Textual's headless driver (everything but the
terminal write) and the real poller (JSON decoding, ClusterState, panels):
- CPU share of one core over the run (process CPU time / wall time, all
  threads), goal <= 20 %;
- key-press-to-repaint latency: `down` (cursor) and `s` (re-sort 200 rows),
  from the key to the app idle again with the screen refreshed, goal <= 100 ms.
The peer, in the same run, is the same console on the 6 recorded brokers.
Median of the runs; exits 1 when a goal is missed.

    .venv/bin/python bench/console_refresh.py [--seconds 8] [--runs 2] [--brokers 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import peak_rss_mib  # noqa: E402
from console.config import ConsoleConfig  # noqa: E402
from console.data.poller import Poller  # noqa: E402
from console.data.sources import ReplayDir  # noqa: E402
from console.tui.app import FloodgateApp  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "console" / "recorded" / "demo"


class ChangingReplay(ReplayDir):
    """The recording, with every latency and rate moved a little on each poll, so
    every cell of the table changes each second as it does on a live cluster."""

    polls = 0
    factor = 1.0

    def fetch(self):
        self.polls += 1
        self.factor = 1.0 + 0.37 * (self.polls % 7) / 7
        return super().fetch()

    def decode_stats(self, doc):
        for window in doc.get("ops", {}).get("send", {}).values():  # a fresh dict per poll
            for k, v in window.items():
                if isinstance(v, float):
                    window[k] = v * self.factor
        return super().decode_stats(doc)


def make_app(n: int) -> FloodgateApp:
    replay = ChangingReplay(DATA, copies=-(-n // 6) if n > 6 else 1)
    replay.docs = replay.docs[:n]
    cfg = ConsoleConfig(replay=DATA, refresh=1.0).validate()
    return FloodgateApp(cfg, Poller(cfg, replay, None, None))


async def key_to_repaint(app, pilot, key: str, presses: int = 12) -> float:
    """Median seconds from posting a key to the next frame the app paints.

    Frames are seen by wrapping App._display (what hands a frame to the driver);
    a sample during which a poll landed (the state changed) is thrown away.
    """
    frames: list[float] = []
    paint = app._display

    def display(screen, renderable):
        paint(screen, renderable)
        frames.append(time.perf_counter())

    app._display = display
    samples: list[float] = []
    try:
        while len(samples) < presses:
            await pilot.pause(0.1)
            state, seen = app.state, len(frames)
            t0 = time.perf_counter()
            app.simulate_key(key)
            while len(frames) == seen and time.perf_counter() - t0 < 2.0:
                await asyncio.sleep(0.001)
            if app.state is state and len(frames) > seen:
                samples.append(frames[seen] - t0)
    finally:
        app._display = paint
    return statistics.median(samples)


async def measure(n: int, seconds: float) -> dict:
    app = make_app(n)
    async with app.run_test(size=(160, 50)) as pilot:
        while app.state is None or len(app.state.brokers) != n:
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu_share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        keys = {key: await key_to_repaint(app, pilot, key) for key in ("down", "s")}
    return {"cpu": cpu_share, **keys}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--brokers", type=int, default=200)
    args = ap.parse_args()
    results = {}
    for n in (6, args.brokers):
        runs = [asyncio.run(measure(n, args.seconds)) for _ in range(args.runs)]
        results[n] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        r = results[n]
        print(f"{n:4d} brokers: CPU {r['cpu'] * 100:5.1f} % of a core   key→repaint "
              f"down {r['down'] * 1000:6.1f} ms  sort {r['s'] * 1000:6.1f} ms   "
              f"peak RSS {peak_rss_mib():.0f} MiB", flush=True)
    big, small = results[args.brokers], results[6]
    print(f"{args.brokers} vs 6 brokers: CPU ×{big['cpu'] / max(small['cpu'], 1e-9):.1f}, "
          f"sort latency ×{big['s'] / max(small['s'], 1e-9):.1f}")
    ok = big["cpu"] <= 0.20 and max(big["down"], big["s"]) <= 0.100
    print("goals (CPU <= 20 %, key→repaint <= 100 ms): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
