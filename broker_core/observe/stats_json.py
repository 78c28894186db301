"""`/stats` as JSON text, each closed second's histograms encoded once.

A document with the 300 s of history the console's first poll and `floodgate status`
ask for holds ~1,200 per-second histograms, built and encoded on every request on the
loop that serves sends: 3.2 ms in-process (150 KB), ~6 ms more than a document without
history in `make demo`, where one `status` (every broker at once) was followed by a
second of 29-33 ms sends on the fault-free masters. A closed second never changes, so
its text is kept until it leaves the history (0.15 ms a document); the same document
(`stats_doc.stats_document`) is assembled from it.
"""

from __future__ import annotations

import json

from broker_core.observe.snapshot import BrokerSnapshot
from broker_core.observe.stats_doc import BrokerStats


class StatsJson:
    """One broker's encoder: `document(snap, history_s)` -> the /stats body (bytes)."""

    def __init__(self) -> None:
        self._seconds: dict[tuple[str, int], str] = {}  # (op, second) -> its JSON

    def document(self, snap: BrokerSnapshot, history_s: int = 0) -> bytes:
        doc = BrokerStats.from_snapshot(snap).to_dict()
        doc.pop("history", None)
        head = json.dumps(doc)
        return f'{head[:-1]}, "history": {self._history(snap, history_s)}}}'.encode()

    def _history(self, snap: BrokerSnapshot, history_s: int) -> str:
        if not history_s:
            return "{}"
        seconds = snap.last_seconds(history_s)
        cache = self._seconds
        ops = []
        for op in snap.windows:
            texts = []
            for s in seconds:
                text = cache.get((op, s.ts))
                if text is None:
                    text = cache[op, s.ts] = json.dumps({"ts": s.ts, **s.ops[op].hist.to_dict()})
                texts.append(text)
            ops.append(f'{json.dumps(op)}: [{", ".join(texts)}]')
        if snap.history:  # seconds gone from the history are asked for no more
            oldest = snap.history[0].ts
            for key in [k for k in cache if k[1] < oldest]:
                del cache[key]
        return "{" + ", ".join(ops) + "}"
