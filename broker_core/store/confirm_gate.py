"""A sync master's confirm offset (RocketMQ 5's): readers see a message once every
in-sync slave holds it.

A sync master stores a message, streams it to its slaves and answers the send once they
all hold it. Its readers saw the message at once: a pull between the put and the slaves'
acks took a message the group did not hold yet, and a failover then cut it from the log
though a consumer had acted on it (a send that failed, read anyway; RocketMQ 5 builds its
ConsumeQueue only up to the confirm offset for this reason). While the gate is active a
put writes its records to the CommitLog and numbers them in their queues at once, but
their ConsumeQueue units wait here until `take(upto)`: the offset every in-sync slave
acknowledged (`ha.master`). With no slave in sync the master alone confirms: the gate is
opened and what it held goes to the queues.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Unit = tuple[int, int, int]  # (physical offset, size, tag hash): a ConsumeQueue unit
Keyed = tuple[list[str], int, int]  # (keys, physical offset, store ms): key index entries
Held = tuple[int, str, int, list[Unit], "list[Keyed] | None"]


class ConfirmGate:
    def __init__(self) -> None:
        self.active = False  # set by the master: a slave is in sync
        # (end offset, topic, queue id, its units, its keys), in CommitLog order
        self._held: deque[Held] = deque()
        self.waiting: dict[tuple[str, int], int] = {}  # (topic, queue id) -> units held

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def hold(self, topic: str, queue_id: int, units: list[Unit], end: int,
             keys: list[Keyed] | None = None) -> None:
        self._held.append((end, topic, queue_id, units, keys))
        key = (topic, queue_id)
        self.waiting[key] = self.waiting.get(key, 0) + len(units)

    def first_held(self) -> int | None:
        """Where the oldest record held starts: every record below has its units in the
        queues (the checkpoint's bound: recovery rebuilds the units from there)."""
        try:  # (read by the checkpoint's thread while the loop takes from the left)
            return self._held[0][3][0][0]
        except IndexError:
            return None

    def take(self, upto: int | None) -> list[Held]:
        """The records ending at or before `upto` (None: all), oldest first."""
        held, out = self._held, []
        while held and (upto is None or held[0][0] <= upto):
            entry = held.popleft()
            key = (entry[1], entry[2])
            left = self.waiting[key] - len(entry[3])
            if left:
                self.waiting[key] = left
            else:
                del self.waiting[key]
            out.append(entry)
        return out

    def release(self, upto: int | None, queue_for: Callable[[str, int], object],
                index=None) -> set[tuple[str, int]]:
        """Put the units of the records ending at or before `upto` in their queues
        (`queue_for(topic, queue id)`) and their keys in `index`, in CommitLog order
        (under the store's put lock); returns the queues they went to."""
        touched: set[tuple[str, int]] = set()
        entries = self.take(upto)
        for i, (_end, topic, qid, units, keyed) in enumerate(entries):
            cq = queue_for(topic, qid)
            try:
                cq.ensure_capacity(len(units))
            except OSError as exc:  # no room for a queue file: tried again at the next ack
                log.error("queue %s-%d: units held for the slaves not written: %s",
                          topic, qid, exc)
                self.put_back(entries[i:])
                break
            for phys, size, th in units:
                cq.append_unit(phys, size, th)
            if keyed and index is not None:
                for keys, phys, ms in keyed:
                    index.add(keys, phys, ms)
            touched.add((topic, qid))
        return touched

    def put_back(self, entries: list[Held]) -> None:
        """Entries `take` gave that could not reach their queues: held again, first."""
        for entry in reversed(entries):
            self._held.appendleft(entry)
            key = (entry[1], entry[2])
            self.waiting[key] = self.waiting.get(key, 0) + len(entry[3])
