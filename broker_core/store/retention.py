"""Retention (RocketMQ's CleanCommitLogService): old segments go, disk pressure is watched.

* A segment whose newest message is older than ``retention_hours`` is
  deleted, oldest first, never the one being written.
* Above ``disk_max_used_ratio`` of the filesystem, the oldest segments go
  even if younger, until usage falls below it.
* Above ``disk_full_ratio`` the store refuses puts with DISK_FULL (the flag
  is refreshed every second, at every segment roll and after each pass).

ConsumeQueue files and min offsets follow the CommitLog's new min offset.
Time comes from the store's wall clock (injected in tests): message store
timestamps are wall-clock milliseconds.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.protocol.record import HEADER, HEADER_SIZE, MESSAGE_MAGIC
from broker_core.store.commitlog import CommitLog
from broker_core.store.flush import ServiceThread
from broker_core.store.mapped_file import MappedFile

log = logging.getLogger(__name__)


@dataclass
class RetentionReport:
    deleted: list[str] = field(default_factory=list)  # segment file names, oldest first
    expired: int = 0  # of which for age
    for_disk: int = 0  # of which for disk pressure
    disk_used_ratio: float = 0.0


def disk_used_ratio(path: str) -> float:
    """Used fraction of the filesystem holding ``path`` (root-reserved blocks count as used)."""
    st = os.statvfs(path)
    if not st.f_blocks:
        return 0.0
    return (st.f_blocks - st.f_bfree) / st.f_blocks


def newest_timestamp_ms(seg: MappedFile, following: MappedFile | None) -> int | None:
    """Store timestamp of the newest record in ``seg``, or None if unknown."""
    if seg.max_store_timestamp:
        return seg.max_store_timestamp
    if following is not None:
        ts = _first_timestamp(following)
        if ts is not None:  # the next segment's first record is at least as new
            return ts
    return _walk_last_timestamp(seg)


def _first_timestamp(seg: MappedFile) -> int | None:
    try:
        h = HEADER.unpack_from(seg.mm, 0)
    except ValueError:
        return None
    return h[10] if h[1] == MESSAGE_MAGIC else None


def _walk_last_timestamp(seg: MappedFile) -> int | None:
    pos, last = 0, None
    mm = seg.mm
    while pos + HEADER_SIZE <= seg.size:
        h = HEADER.unpack_from(mm, pos)
        if h[1] != MESSAGE_MAGIC or h[0] <= 0:
            break
        last = h[10]
        pos += h[0]
    seg.max_store_timestamp = last or 0
    return last


class RetentionService(ServiceThread):
    name = "retention"

    def __init__(
        self,
        commitlog: CommitLog,
        queues: Callable[[], list],
        *,
        retention_hours: float,
        disk_max_used_ratio: float,
        wall_clock: Callable[[], float],
        on_disk_ratio: Callable[[float], None],
        check_interval_s: float = 1.0,
        retention_interval_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(check_interval_s, commitlog.bell("grew"))
        self.commitlog = commitlog
        self.queues = queues
        self.retention_hours = retention_hours
        self.disk_max_used_ratio = disk_max_used_ratio
        self.wall_clock = wall_clock
        self.on_disk_ratio = on_disk_ratio
        self.retention_interval_s = retention_interval_s
        self._monotonic = monotonic
        self._last_pass = monotonic() - retention_interval_s  # the first round passes
        self._checked_at = -1  # the log's end when the disk was last looked at
        # wall s the oldest kept segment expires (a pass is owed at start: the store may
        # hold segments that expired while it was down)
        self.next_expiry: float | None = wall_clock()

    def check_disk(self) -> float:
        self._checked_at = self.commitlog.write_offset
        ratio = disk_used_ratio(self.commitlog.directory)
        self.on_disk_ratio(ratio)
        return ratio

    def quiet_for(self) -> float | None:
        """Nothing written since the disk was looked at and no pass owed: asleep until
        the log grows or its oldest segment expires."""
        if self.commitlog.write_offset != self._checked_at:
            return None
        if self.next_expiry is None:
            return math.inf
        return max(0.0, self.next_expiry - self.wall_clock()) or None

    def run_once(self, now: float | None = None) -> RetentionReport:
        """One full pass at wall-clock time ``now`` (seconds; default the store's clock)."""
        now = self.wall_clock() if now is None else now
        cutoff_ms = (now - self.retention_hours * 3600.0) * 1000.0
        report = RetentionReport()
        cl = self.commitlog
        self.next_expiry = None
        while len(segs := cl.segments) >= 2:
            newest = newest_timestamp_ms(segs[0], segs[1])
            if newest is None or newest >= cutoff_ms:
                if newest is not None:
                    self.next_expiry = newest / 1000 + self.retention_hours * 3600.0
                break
            gone = cl.delete_oldest()
            if gone is None:
                break
            report.deleted.append(os.path.basename(gone.path))
            report.expired += 1
        ratio = disk_used_ratio(cl.directory)
        while ratio > self.disk_max_used_ratio:
            gone = cl.delete_oldest()
            if gone is None:
                break
            report.deleted.append(os.path.basename(gone.path))
            report.for_disk += 1
            ratio = disk_used_ratio(cl.directory)
        if report.deleted:
            floor = cl.min_offset
            for cq in self.queues():
                cq.delete_below(floor)
        report.disk_used_ratio = ratio
        self.on_disk_ratio(ratio)
        return report

    def pass_due(self) -> bool:
        """True (and the pass counted as started) once a retention pass is due: the disk
        is checked every second, segments judged every `retention_interval_s`."""
        now = self._monotonic()
        if now - self._last_pass < self.retention_interval_s:
            return False
        self._last_pass = now
        return True

    def run_round(self) -> None:
        """The disk checked; segments judged if a pass is due."""
        self.check_disk()
        if self.pass_due():
            self.run_once()
        elif self.next_expiry is None and len(self.commitlog.segments) >= 2:
            # a segment filled since the last pass: judged at the next, even if the log
            # goes quiet before then (it slept until written again, keeping expired data)
            due_in = self._last_pass + self.retention_interval_s - self._monotonic()
            self.next_expiry = self.wall_clock() + max(0.0, due_in)

    def _run_safely(self) -> None:
        try:
            self.run_round()
        except Exception:  # logged; the next round tries again
            log.exception("retention round failed")
