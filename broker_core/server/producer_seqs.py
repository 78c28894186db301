"""Which idempotent sends this broker holds: (producer id, sequence) -> where it is stored.

A retry of a send whose first try was stored (its answer lost to a timeout, a cut
link, a failover) must not be stored again: the long chaos run stored 9 % of its
acknowledged sends twice that way. The broker looks a flagged send's pair up before
it appends (on the loop thread, in the put itself: a retry that arrives while the
first try still waits for its slaves finds it), and answers a duplicate with the
first try's offsets and message id, after the same promise (the disk, the slaves).

Kept in blocks of BLOCK sequences of one producer (the physical offset of each, -1
for not held), touched blocks last: a block untouched for `window_s` is dropped, and
at most `max_blocks` are kept (oldest first). The numbers below a dropped block are
then "forgotten": a retry of one is answered SEQUENCE_EXPIRED (nothing stored now,
the first try may have been), never stored a second time. The producer gives up on a
send long before `window_s` (client.idempotence.RETRY_HORIZON_S).

A broker rebuilds the table from the CommitLog (each record's PSEQ property) when it
starts and when it becomes master: the records of the last `window_s`, found through the
ConsumeQueues' timestamps, read in a worker thread; until it is done, retries are
answered NOT_MASTER (send again in a moment) and the rest served as ever: a first try
(protocol.idempotence, FLAG_FIRST_TRY) cannot be held, and is stored at once. What was
stored while the worker read (those first tries among it) is read on the loop when
its table is adopted: the log past where the worker stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable

from broker_core.protocol.idempotence import PROP_PRODUCER_SEQ, parse_seq
from broker_core.store import MessageStore
from broker_core.store.property_scan import property_values

log = logging.getLogger("floodgate.broker")

BLOCK = 512  # sequences a block (4 KiB of offsets)
WINDOW_S = 120.0  # a block untouched this long is forgotten
MAX_BLOCKS = 16384  # at most 64 MiB of offsets: 8 M sends within the window
EXPIRED = -2  # `find`: older than what is remembered
DUPLICATE = "duplicate"  # PutResult.reason of a send answered from its first try
READ_INLINE_BYTES = 4 << 20  # less to read back than this (~0.1 s): on the loop, at once


class ProducerSeqs:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 window_s: float = WINDOW_S, max_blocks: int = MAX_BLOCKS) -> None:
        self.clock, self.window_s, self.max_blocks = clock, window_s, max_blocks
        self._blocks: OrderedDict[tuple[int, int], list] = OrderedDict()  # -> [touched, offsets]
        self._floor: dict[int, tuple[int, float]] = {}  # pid -> (first seq remembered, since)
        self.stale = True  # rebuilt from the CommitLog before it is used (`ready`)
        self._generation = 0  # moves with each role change: an older rebuild is dropped
        self._worker: threading.Thread | None = None
        self._built: tuple[int, ProducerSeqs] | None = None  # a rebuild done, to adopt
        self.duplicates = 0  # retries answered from their first try
        self.expired = 0  # retries answered SEQUENCE_EXPIRED
        self.rebuilt: dict[str, float] = {}  # the last rebuild: records, found, seconds
        self.read_to = 0  # where the last reading of the CommitLog ended (a rebuild's)

    def find(self, pid: int, seq: int) -> int | None:
        """The physical offset of the stored send, EXPIRED, or None (not held)."""
        block = self._blocks.get((pid, seq // BLOCK))
        if block is not None:
            phys = block[1][seq % BLOCK]
            if phys >= 0:
                return phys
        floor = self._floor.get(pid)
        return EXPIRED if floor is not None and seq < floor[0] else None

    def add(self, pid: int, seq: int, phys: int) -> None:
        key = (pid, seq // BLOCK)
        block = self._blocks.get(key)
        now = self.clock()
        if block is None:
            block = self._blocks[key] = [now, array("q", [-1]) * BLOCK]
            self._sweep(now)
        else:
            block[0] = now
            self._blocks.move_to_end(key)
        block[1][seq % BLOCK] = phys

    def _sweep(self, now: float) -> None:
        """Drop the blocks untouched for the window (and past the cap), oldest first; the
        producers' floors rise over them. Runs when a block is made: every BLOCK sends."""
        blocks, floors = self._blocks, self._floor
        while blocks:
            (pid, index), (touched, _offsets) = next(iter(blocks.items()))
            if touched > now - self.window_s and len(blocks) <= self.max_blocks:
                break
            del blocks[(pid, index)]
            old = floors.get(pid)
            floors[pid] = (max((index + 1) * BLOCK, old[0] if old else 0), now)
        if len(floors) > len(blocks) + 1024:  # producers long gone: forget them too
            held = {pid for pid, _i in blocks}
            for pid, (_seq, since) in list(floors.items()):
                if pid not in held and since < now - self.window_s:
                    del floors[pid]

    def ready(self, store: MessageStore, wall_ms: int) -> bool:
        """Whether the table can be used now. A stale one is rebuilt in a worker thread
        (the loop serves everything else meanwhile: a promoted slave reading two minutes
        back at 20 k msgs/s took seconds) and adopted here, on the loop thread."""
        if not self.stale:
            return True
        built = self._built
        if built is not None and built[0] == self._generation:
            fresh = built[1]
            fresh._fill(store, fresh.read_to)  # stored while it read: the first tries
            self._adopt(fresh)
            return True
        worker = self._worker
        if worker is None or not worker.is_alive():
            gen = self._generation
            start = first_record_since(store, wall_ms - int(self.window_s * 1000))
            if start is None or store.log_end() - start <= READ_INLINE_BYTES:
                self._build(store, start, gen)  # little to read: now
                self._adopt(self._built[1])
                return True
            self._worker = threading.Thread(target=self._build, args=(store, start, gen),
                                            daemon=True, name="floodgate-producer-seqs")
            self._worker.start()
        return False

    def mark_stale(self) -> None:
        """The broker became master (or stopped being one): read back before use."""
        self.stale = True
        self._generation += 1
        self._built = None

    def join(self, timeout: float | None = None) -> None:
        """Wait for a rebuild under way (tests; `ready` adopts it)."""
        if self._worker is not None:
            self._worker.join(timeout)

    def ensure(self, store: MessageStore, wall_ms: int) -> None:
        """Rebuild now, on this thread, if stale (a broker starting, before it serves)."""
        if self.stale:
            self._build(store, first_record_since(store, wall_ms - int(self.window_s * 1000)),
                        self._generation)
            self._adopt(self._built[1])

    def _build(self, store: MessageStore, start: int | None, gen: int) -> None:
        fresh = ProducerSeqs(self.clock, self.window_s, self.max_blocks)
        try:
            fresh._fill(store, start)
        except Exception:  # noqa: BLE001 - a segment gone under the scan: what was read
            log.exception("reading back idempotent sends from the CommitLog")
        self._built = (gen, fresh)

    def _adopt(self, fresh: ProducerSeqs) -> None:
        self._blocks, self._floor, self.rebuilt = fresh._blocks, fresh._floor, fresh.rebuilt
        self.read_to = fresh.read_to
        self._built = None
        self.stale = False

    def _fill(self, store: MessageStore, start: int | None) -> None:
        """Add the pairs of the records from `start` to the log's end (None: none);
        `rebuilt` counts this reading and the ones before it into this table."""
        t0 = time.perf_counter()
        seen = found = 0
        end = store.log_end()
        if start is not None and start < end:
            for phys, value in property_values(store.commitlog, start, end,
                                               PROP_PRODUCER_SEQ):
                seen += 1
                pair = parse_seq(value) if value else None
                # (the first record of a pair: a delayed or transactional send's copy into
                # its real queue keeps the pair, and the send's answer named the original)
                if pair is not None and self.find(*pair) is None:
                    found += 1
                    self.add(pair[0], pair[1], phys)
        took = time.perf_counter() - t0
        self.read_to = max(self.read_to, end)
        was = self.rebuilt
        self.rebuilt = {"records": was.get("records", 0) + seen,
                        "sends": was.get("sends", 0) + found,
                        "seconds": round(was.get("seconds", 0) + took, 3)}
        if found:  # (this reading's own figures: a tail read after a worker's is its own line)
            log.info("idempotent sends read back from the CommitLog: %d of %d records in "
                     "%.3f s", found, seen, took)

    def figures(self) -> dict:
        """/stats `idempotence`."""
        return {"producers": len({pid for pid, _i in self._blocks}),
                "blocks": len(self._blocks), "duplicates": self.duplicates,
                "expired": self.expired, "window_s": self.window_s, "rebuilt": self.rebuilt}


def first_record_since(store: MessageStore, ms: int) -> int | None:
    """The physical offset of the oldest record stored at or after `ms` in any queue (a
    record's start), or None when there is none."""
    first = None
    for topic, qid in store.queues():
        offset = store.offset_at_time(topic, qid, ms)
        low, high = store.queue_offsets(topic, qid)
        if low <= offset < high:
            phys = store.queue_unit(topic, qid, offset)
            first = phys if first is None else min(first, phys)
    held = store.gate.first_held() if store.gate is not None else None
    if first is None and held is not None:
        return held  # a leader's records held at the gate (a majority holds none yet)
    return first
