"""Delayed messages delivered when due (RocketMQ 4's ScheduleMessageService).

A delayed send is stored at once in the schedule topic, queue level-1, with its
real topic and queue in properties (server.send_ops): acknowledged, flushed and
replicated as any record. Here, when the next message is due (the broker's
housekeeping arms a deadline for it), each level's queue is read from its
delivery offset: a message whose store time plus
the level's delay has passed is stored again in its real queue (body, tags, keys,
properties and born time as sent) and the offset moves past it; the first message
not yet due ends that level's pass (a level's queue is in due order).

Delivery offsets are a table of the broker's (`delay_offsets.json`, saved by the
tick and sent to slaves with the other tables), so a restart, a SIGKILL or a
failover delivers what had not been: at least once (a message delivered in the
second before a crash may come twice), never lost. Only a master (or a broker
outside any group) delivers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from broker_core.protocol.delay import (
    LABELS,
    LEVELS_S,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    SCHEDULE_TOPIC,
)
from broker_core.protocol.system_topics import PROP_COPY_OF
from broker_core.server.group_state import JsonTable, read_json
from broker_core.store import MessageStore, PutResult

log = logging.getLogger("floodgate.broker")

BATCH = 64  # messages read from a level's queue at a time
MAX_PER_PASS = 2048  # messages one pass delivers (the rest at the loop's next turn)


class DelayOffsets(JsonTable):
    """level -> the next schedule-queue offset to deliver."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[int, int] = {int(k): int(v) for k, v in read_json(path).items()}
        self.dirty = False

    def get(self, level: int) -> int:
        return self.offsets.get(level, 0)

    def set(self, level: int, offset: int) -> None:
        if self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self.dirty = True

    def document(self) -> dict:
        return {str(k): v for k, v in sorted(self.offsets.items())}

    def merge(self, doc: dict) -> None:
        """A master's offsets (a slave delivers from there once promoted), never back."""
        for k, v in doc.items():
            if str(k).isdigit() and int(v) > self.offsets.get(int(k), -1):
                self.offsets[int(k)] = int(v)
                self.dirty = True


class DelayService:
    """`deliver(topic, qid, message) -> bool`: store a due message in its real queue
    (False: it cannot go there, e.g. its topic was deleted; it is dropped and counted).
    `wall_ms`: the clock store times are read against."""

    def __init__(self, store: MessageStore, offsets: DelayOffsets,
                 deliver: Callable[[str, int, object], bool],
                 wall_ms: Callable[[], int]) -> None:
        self.store, self.offsets, self.deliver, self.wall_ms = store, offsets, deliver, wall_ms
        self.delivered = 0
        self.dropped = 0
        self.late_ms: list[float] = []  # how late each delivery of the last pass was
        self._head_due: dict[int, int] = {}  # level -> due time of its first undelivered

    def run_once(self) -> int:
        """Deliver what is due; how many messages it moved past (delivered or dropped)."""
        now = self.wall_ms()
        done = 0
        self.late_ms = []
        for level in range(1, len(LEVELS_S) + 1):
            qid = level - 1
            offset = self.offsets.get(level)
            lo, hi = self.store.queue_offsets(SCHEDULE_TOPIC, qid)
            offset = max(offset, lo)  # retention took older ones
            self._head_due.pop(level, None)
            delay_ms = LEVELS_S[qid] * 1000
            stop = False
            while offset < hi and not stop:
                got = self.store.get(SCHEDULE_TOPIC, qid, offset, BATCH)
                if not got.messages:
                    offset = max(offset, got.next_offset)
                    break
                for m in got.messages:
                    due = m.store_timestamp + delay_ms
                    if due > now or done >= MAX_PER_PASS:  # not yet, or the next pass's
                        self._head_due[level] = due
                        stop = True
                        break
                    self._deliver(m)
                    self.late_ms.append(now - due)
                    offset = m.queue_offset + 1
                    done += 1
                else:
                    offset = max(offset, got.next_offset)
            self.offsets.set(level, offset)
        return done

    def next_due_ms(self) -> int | None:
        """When the next message the last pass left is due (wall ms), None if none."""
        return min(self._head_due.values(), default=None)

    def _deliver(self, m) -> None:
        props = m.properties or {}
        topic = props.get(PROP_REAL_TOPIC, "")
        try:
            qid = int(props.get(PROP_REAL_QID, ""))
        except ValueError:
            qid = -1
        if topic and qid >= 0 and self.deliver(topic, qid, m):
            self.delivered += 1
            return
        self.dropped += 1
        log.warning("delayed message at schedule offset %d (level queue %d) dropped: its "
                    "topic %r queue %d takes no messages", m.queue_offset, m.queue_id, topic, qid)

    def figures(self) -> dict:
        """Pending per level (labels), in all, and the oldest overdue one's lateness."""
        now = self.wall_ms()
        pending = {}
        for level in range(1, len(LEVELS_S) + 1):
            lo, hi = self.store.queue_offsets(SCHEDULE_TOPIC, level - 1)
            n = hi - max(self.offsets.get(level), lo)
            if n > 0:
                pending[LABELS[level - 1]] = n
        overdue = max((now - due for due in self._head_due.values() if due <= now),
                      default=0)
        return {"pending": pending, "pending_total": sum(pending.values()),
                "overdue_s": overdue / 1000, "delivered_total": self.delivered,
                "dropped_total": self.dropped}


def store_due(store: MessageStore, topic: str, qid: int, m) -> PutResult:
    """Put a due message in its real queue as it was sent (born time included), with
    the id it was due from."""
    props = {k: v for k, v in (m.properties or {}).items()
             if k not in (PROP_REAL_TOPIC, PROP_REAL_QID, "TAGS", "KEYS")}
    props[PROP_COPY_OF] = m.msg_id
    return store.put(topic, qid, m.body, m.tags, m.keys, props, wait=False,
                     born_timestamp=m.born_timestamp)
