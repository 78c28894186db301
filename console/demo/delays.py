"""How long the demo's messages take from its producer's send to a consumer's hand.

The demo's producer stamps each body with its send time (`bench produce --stamp`,
broker_core.client.loadgen.STAMP); its consumer groups, on the same host, record
now - stamp per group in 10 s windows, and write them to `DATA/consumer_delay.json`
every few seconds (atomically) for the headless summary and the benches: the Mogujie
talk's echo consumer saw 10-15 ms, unchanged as volume grew; a consumer that keeps
up should see a few ms.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from broker_core.client.loadgen import sent_at
from broker_core.fsutil import write_json_atomic
from heatmap import LatencyHistogram

WINDOW_S = 10
FILE = "consumer_delay.json"


class Delays:
    """`part`: which clients process writes (each its own file). `start()` saves every
    `save_every_s` from a thread of its own; `close()` stops it and saves once more."""

    def __init__(self, data_dir: Path, part: str | None = None,
                 save_every_s: float = 5.0) -> None:
        self.path = Path(data_dir) / (FILE if part is None else FILE.replace(".json",
                                                                              f"-{part}.json"))
        self.save_every_s = save_every_s
        self._windows: dict[str, dict[int, LatencyHistogram]] = {}  # group -> start -> hist
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._saver: threading.Thread | None = None

    def start(self) -> Delays:
        # not from `record`: the consumer that measures would wait on the write (its
        # fsyncs took 3-12 ms under the demo's load, every few seconds)
        self._saver = threading.Thread(target=self._save_every, daemon=True,
                                       name="demo-delays")
        self._saver.start()
        return self

    def _save_every(self) -> None:
        while not self._stop.wait(self.save_every_s):
            self.save()

    def close(self) -> None:
        self._stop.set()
        if self._saver is not None:
            self._saver.join()
        self.save()

    def record(self, group: str, msgs) -> None:
        """`msgs` just handed to `group`'s consumer: each stamped one's delay counted."""
        now = time.time()
        window = int(now) // WINDOW_S * WINDOW_S
        with self._lock:
            hist = self._windows.setdefault(group, {}).setdefault(window, LatencyHistogram())
            for m in msgs:
                t = sent_at(m.body)
                if t is not None:
                    hist.record(max(0.0, now - t))

    def save(self) -> None:
        with self._lock:
            doc = {g: {str(w): h.to_dict() for w, h in sorted(ws.items()) if h.count}
                   for g, ws in self._windows.items()}
        try:
            write_json_atomic(self.path, doc)
        except OSError:
            pass  # a full disk: the summary says nothing of delays


def summarize(data_dir: Path) -> dict:
    """group -> {count, p50_s, p99_s, max_s, worst_window_p99_s} over the windows after
    the first (start-up), from what the consumers last wrote ({} when nothing)."""
    doc = {}
    for path in sorted(Path(data_dir).glob(FILE.replace(".json", "*.json"))):
        try:
            doc.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    out = {}
    for group, windows in doc.items():
        hists = [LatencyHistogram.from_dict(h) for _w, h in sorted(windows.items(),
                                                                   key=lambda kv: int(kv[0]))]
        judged = hists[1:] or hists
        total = LatencyHistogram()
        for h in judged:
            total.merge(h)
        if not total.count:
            continue
        out[group] = {"count": total.count, "p50_s": total.quantile(0.5),
                      "p99_s": total.quantile(0.99), "max_s": total.max,
                      "worst_window_p99_s": max(h.quantile(0.99) or 0.0 for h in judged)}
    return out
