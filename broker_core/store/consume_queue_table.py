"""Every ConsumeQueue of a store (store.consume_queue), by topic and queue id, with the
bound on how many keep their files mapped.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections import OrderedDict

from broker_core.fsutil import PendingDirs
from broker_core.store.consume_queue import ConsumeQueue


class ConsumeQueueTable:
    """Every ConsumeQueue of a store, by (topic, queue id); created on first write.

    At most `max_mapped` queues keep their files mapped (each mapping holds a
    descriptor): past it, `evict` (called by the put path, under the put lock)
    unmaps the least recently used. `touch` on each put and read keeps the order
    (an OrderedDict: each of its calls is one step under the GIL).
    """

    def __init__(self, root: str, units_per_file: int,
                 pending_dirs: PendingDirs | None = None, max_mapped: int = 0) -> None:
        self.pending_dirs = pending_dirs
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.units_per_file = units_per_file
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.max_mapped = max_mapped  # 0: no limit
        self.mapped: OrderedDict[ConsumeQueue, None] = OrderedDict()  # oldest use first
        self.releases = 0

    def load(self) -> None:
        for topic in os.listdir(self.root):
            tdir = os.path.join(self.root, topic)
            for qid in os.listdir(tdir) if os.path.isdir(tdir) else ():
                if qid.isdigit():
                    self.get_or_create(topic, int(qid)).load()
        self.evict()

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            with self._lock:
                cq = self.queues.get(key)
                if cq is None:
                    cq = ConsumeQueue(self.root, topic, queue_id, self.units_per_file,
                                      self.pending_dirs, self._on_mapped)
                    self.queues[key] = cq
        return cq

    def _on_mapped(self, cq: ConsumeQueue) -> None:
        self.mapped[cq] = None
        self.mapped.move_to_end(cq)

    def touch(self, cq: ConsumeQueue) -> None:
        """`cq` was just used: the last to be unmapped."""
        try:
            self.mapped.move_to_end(cq)
        except KeyError:  # unmapped (it is mapped again when read or written)
            pass

    @property
    def over(self) -> bool:
        return 0 < self.max_mapped < len(self.mapped)

    def evict(self, keep: ConsumeQueue | None = None) -> int:
        """Unmap the least recently used queues down to the limit, less a 1 % slack so
        that not every new queue unmaps one (not `keep`, the one being written). Under
        the put lock: no put is using a mapping."""
        released = 0
        floor = self.max_mapped - max(1, self.max_mapped // 100)
        mapped = self.mapped
        while self.max_mapped and len(mapped) > floor:
            cq, _ = mapped.popitem(last=False)
            if cq is keep:
                mapped[cq] = None
                if len(mapped) == 1:
                    break
                continue
            released += cq.release()
        self.releases += released
        return released

    def all(self) -> list[ConsumeQueue]:
        return list(self.queues.values())

    def drop_topic(self, topic: str) -> int:
        """Delete every queue of `topic` (under the put lock); how many there were."""
        with self._lock:
            dropped = [cq for (t, _q), cq in self.queues.items() if t == topic]
            for cq in dropped:
                del self.queues[(topic, cq.queue_id)]
                self.mapped.pop(cq, None)
        for cq in dropped:
            cq.drop()
        shutil.rmtree(os.path.join(self.root, topic), ignore_errors=True)
        return len(dropped)
