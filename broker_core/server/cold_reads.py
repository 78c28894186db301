"""A pull far behind the head has its records read from the disk off the loop first.

A pull answer copies its records out of the mapped CommitLog on the event loop. Where
they are in the page cache that is a memcpy; where a consumer catches up from the disk,
each page is a fault that blocks the loop, and with it every send: in the backlog test
(`floodgate capacity backlog`) a 4 MiB answer read at ~130 MB/s held the loop ~30 ms at
a time (sync sends' p99 20 ms, their max seconds). RocketMQ serves such pulls off its
send path and tells apart a message "in memory" from one "in disk" by how far behind the
head it is (accessMessageInMemoryMaxRatio, 40 % of the memory); so does this.

A cold pull's records are located first (the ConsumeQueue's units: small, and read
anyway), their CommitLog ranges read with `os.pread` in a worker thread (which lets the
GIL go while the disk works: a page fault in a thread would hold it), and the answer is
then built on the loop from pages that are in the cache.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

from broker_core.store.reader import MAX_READ_BYTES

IN_MEMORY_RATIO = 0.4  # behind the head by more than this share of the memory: cold
MERGE_GAP = 256 << 10  # ranges this close are read as one
MAX_WARM_BYTES = 16 << 20  # read at most this much ahead of one answer


def memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class ColdReads:
    """`store`: the broker's MessageStore; `cold_bytes`: how far behind the head a record
    is read from the disk off the loop (default: IN_MEMORY_RATIO of the memory)."""

    def __init__(self, store, cold_bytes: int | None = None) -> None:
        self.store = store
        self.cold_bytes = int(memory_bytes() * IN_MEMORY_RATIO) if cold_bytes is None \
            else cold_bytes
        self._pool: ThreadPoolExecutor | None = None
        self.warmed = 0  # answers whose records were read off the loop first

    def ranges(self, topic: str, queues: list[tuple[int, int]], max_msgs: int
               ) -> list[tuple[int, int, int]]:
        """The (fd, file offset, length) the answer will read, if its first record is
        cold (none else): what `warm` reads, merged where close."""
        store = self.store
        log, table = store.commitlog, store.queue_table.queues
        head = log.write_offset
        spans: list[tuple[int, int]] = []
        left, nbytes = max_msgs, 0
        for qid, offset in queues:
            cq = table.get((topic, qid))
            if cq is None or offset >= cq.max_offset:
                continue
            for _qo, phys, size, _th in cq.units(max(offset, cq.min_offset), left):
                if not spans and head - phys <= self.cold_bytes:
                    return []  # in memory: read on the loop as it is
                spans.append((phys, size))
                left, nbytes = left - 1, nbytes + size
                if left <= 0 or nbytes > MAX_READ_BYTES:
                    break
            if left <= 0 or nbytes > MAX_READ_BYTES:
                break
        return _merged(log, spans)

    async def warm(self, ranges: list[tuple[int, int, int]]) -> None:
        """Read `ranges` into the page cache in the worker thread."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="cold-reads")
        self.warmed += 1
        await asyncio.get_running_loop().run_in_executor(self._pool, _read, ranges)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _merged(log, spans: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    out: list[list[int]] = []  # [fd, segment start, file offset, end]
    total = 0
    for phys, size in sorted(spans):
        seg = log.segment_for(phys)
        if seg is None or seg.fd is None:
            continue
        local = phys - seg.start_offset
        last = out[-1] if out else None
        if last is not None and last[1] == seg.start_offset and local - last[3] <= MERGE_GAP:
            grown = max(last[3], local + size)
            total += grown - last[3]
            last[3] = grown
        else:
            out.append([seg.fd, seg.start_offset, local, local + size])
            total += size
        if total > MAX_WARM_BYTES:
            break
    return [(fd, start, end - start) for fd, _seg, start, end in out]


def _read(ranges: list[tuple[int, int, int]]) -> None:
    for fd, start, length in ranges:
        try:
            os.pread(fd, length, start)
        except OSError:
            return  # a segment removed meanwhile: the answer finds out on its own
