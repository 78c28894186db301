"""Pop-style consumption (RocketMQ 5's SimpleConsumer): messages handed out with a
receipt handle, invisible to the group for a while, visible again unless acknowledged.

    pops = Pops(broker)
    taken = pops.take("billing", "orders", 0, batch=16, invisible_s=30)  # [(message, handle, attempt)]
    pops.ack("billing", "orders", handle)          # True; False: stale or unknown
    pops.change("billing", "orders", handle, 60)   # a new handle, or None

Per (group, topic, queue): a cursor (the next offset never handed out), what is
handed out and when it becomes visible again, and what was acknowledged above the
group's committed offset. The committed offset (the broker's offsets table, what
`floodgate offsets show` reads) moves over every offset acknowledged in a row, so a
restart hands out again, at least once, only what was not acknowledged.

The state goes to the group's replicas with its other tables (ha.group_meta: a
master/slave group's META, a raft group's tables record), so a promoted replica goes
on from it: what was out stays invisible until its time (in wall-clock seconds, the
same on every host), what was acknowledged is not handed out again. It is also saved
to `DATA/pops.json` with the broker's other tables (within a second of a change, and on
close), and read back at start: a restarted broker keeps what was out invisible until
its time; a SIGKILL loses at most the last second's changes (handed out again: at least
once, never lost).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.json_table import JsonTable, read_json


@dataclass
class PopQueue:
    cursor: int
    # offset -> [visible again at, attempt, its handle's token, its message group or None]
    inflight: dict[int, list] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)


class PopsFile(JsonTable):
    """Where the state is saved (the broker's table saver writes it when dirty)."""

    def __init__(self, path: Path, pops: Pops) -> None:
        self.path, self.pops = path, pops

    def document(self) -> dict:
        return self.pops.document()


class Pops:
    def __init__(self, broker, clock: Callable[[], float] = time.time) -> None:
        self.broker, self.clock = broker, clock
        self.queues: dict[tuple[str, str, int], PopQueue] = {}
        self.version = 0  # moves with each change: the replicas are sent the state
        self.waiting: Counter[str] = Counter()  # group -> its receives long-polling now
        # told of each acknowledgement (group, topic, queue, offset): the trace's
        # deliveries are stamped by it, whoever acknowledged (a consumer, the DLQ)
        self.on_ack: Callable[[str, str, int, int], None] | None = None
        self.file = PopsFile(Path(broker.config.data_dir) / "pops.json", self)
        self.adopt(read_json(self.file.path))
        self.file.dirty = False

    def _changed(self) -> None:
        self.version += 1
        self.file.dirty = True

    def _queue(self, group: str, topic: str, qid: int) -> PopQueue:
        key = (group, topic, qid)
        q = self.queues.get(key)
        if q is None:
            committed = self.broker.offsets.get(group, topic, qid)
            low = self.broker.store.queue_offsets(topic, qid)[0]
            q = self.queues[key] = PopQueue(max(committed, low))
        return q

    def take(self, group: str, topic: str, qid: int, batch: int, invisible_s: float) -> list:
        """Up to `batch` messages: those whose invisibility ran out first (again, one
        attempt more), then new ones. A FIFO message (one of a message group) is not
        handed out while an earlier one of its group is out and not acknowledged: the
        batch stops before it (a FIFO group's messages sit in one queue, in order)."""
        q, now = self._queue(group, topic, qid), self.clock()
        self.broker.backlog.heard(group)  # (a receive is the group's sign of life)
        offsets = sorted(o for o, e in q.inflight.items() if e[0] <= now)[:batch]
        out = [m for o in offsets for m in self._read(topic, qid, o, 1)]
        busy = {e[3] for e in q.inflight.values() if e[3]}
        if len(out) < batch:
            for m in self._read(topic, qid, q.cursor, batch - len(out)):
                if _group(m) in busy:
                    break  # (the cursor stays: it is handed out once its group is free)
                out.append(m)
                q.cursor = m.queue_offset + 1
        taken = []
        for m in out:
            entry = q.inflight.get(m.queue_offset)
            attempt = entry[1] + 1 if entry else 1
            token = secrets.token_hex(4)
            q.inflight[m.queue_offset] = [now + invisible_s, attempt, token, _group(m)]
            taken.append((m, handle(qid, m.queue_offset, token), attempt))
        if taken:
            self._changed()
        return taken

    def ack(self, group: str, topic: str, receipt: str) -> bool:
        found = self._find(group, topic, receipt)
        if found is None:
            return False
        q, qid, offset = found
        del q.inflight[offset]
        q.acked.add(offset)
        self._changed()
        if self.on_ack is not None:
            self.on_ack(group, topic, qid, offset)
        committed = max(self.broker.offsets.get(group, topic, qid), 0)
        start = committed
        while committed in q.acked:
            q.acked.discard(committed)
            committed += 1
        if committed > start:
            self.broker.offsets.commit(group, topic, qid, committed)
        return True

    def change(self, group: str, topic: str, receipt: str, invisible_s: float) -> str | None:
        found = self._find(group, topic, receipt)
        if found is None:
            return None
        q, qid, offset = found
        token = secrets.token_hex(4)
        q.inflight[offset][0] = self.clock() + invisible_s
        q.inflight[offset][2] = token
        self._changed()
        return handle(qid, offset, token)

    def attempt(self, group: str, topic: str, receipt: str) -> int | None:
        """How many times the message a live handle names was handed out."""
        found = self._find(group, topic, receipt)
        return None if found is None else found[0].inflight[found[2]][1]

    def next_visible(self, group: str, topic: str, qid: int) -> float | None:
        """When the first message handed out and not acknowledged is visible again (a
        waiting receive wakes then, not at its deadline)."""
        q = self.queues.get((group, topic, qid))
        return min((e[0] for e in q.inflight.values()), default=None) if q else None

    def in_flight(self, group: str, topic: str, qid: int) -> int:
        q = self.queues.get((group, topic, qid))
        return len(q.inflight) if q is not None else 0

    def document(self) -> dict:
        return {f"{g}\t{t}\t{qid}": {"cursor": q.cursor, "acked": sorted(q.acked),
                                      "inflight": [[o, *e] for o, e in q.inflight.items()]}
                for (g, t, qid), q in self.queues.items()}

    def adopt(self, doc: dict) -> None:
        """The leader's state (a replica's: it serves none of its own)."""
        queues = {}
        for key, row in doc.items():
            group, topic, qid = key.split("\t")
            queues[(group, topic, int(qid))] = PopQueue(
                int(row["cursor"]), {int(o): list(e) for o, *e in row["inflight"]},
                set(row["acked"]))
        self.queues = queues
        self._changed()

    def held(self, group: str, topic: str, receipt: str):
        """The message a live receipt handle names (None: acknowledged, or handed out
        again since)."""
        found = self._find(group, topic, receipt)
        if found is None:
            return None
        _q, qid, offset = found
        got = self._read(topic, qid, offset, 1)
        return got[0] if got else None

    def _find(self, group: str, topic: str, receipt: str):
        try:
            qid, offset, token = parse_handle(receipt)
        except ValueError:
            return None
        q = self.queues.get((group, topic, qid))
        entry = q.inflight.get(offset) if q is not None else None
        if entry is None or entry[2] != token:
            return None  # acknowledged already, or handed out again since (a stale handle)
        return q, qid, offset

    def _read(self, topic: str, qid: int, offset: int, n: int) -> list:
        return self.broker.store.get(topic, qid, offset, n).messages if n > 0 else []


def _group(m) -> str | None:
    return (m.properties or {}).get("MESSAGE_GROUP")


def handle(qid: int, offset: int, token: str) -> str:
    return f"{qid}.{offset}.{token}"


def parse_handle(text: str) -> tuple[int, int, str]:
    qid, offset, token = text.split(".")
    return int(qid), int(offset), token
