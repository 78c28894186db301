"""How a MessageStore comes up from its directory: the files loaded and recovered in an
order that matters, then the background services that keep them durable and in bounds.

The order: the CommitLog's segments, then the ConsumeQueues and the key index, then
recovery (which needs all three: it cuts the CommitLog at its true end and rebuilds
what derives from it), then whatever retention had already deleted is dropped from the
derived files, and only then is ``abort`` written — a crash before that point is
recovered as the crash it follows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from broker_core.fsutil import PendingDirs, syncfs
from broker_core.store.allocate import SegmentAllocator
from broker_core.store.checkpoint import Checkpoint
from broker_core.store.commitlog import CommitLog
from broker_core.store.config import StoreConfig
from broker_core.store.consume_queue_table import ConsumeQueueTable
from broker_core.store.flush import ConsumeQueueFlushService, commitlog_flush_service
from broker_core.store.index_service import IndexService
from broker_core.store.recovery import RecoveryReport, recover
from broker_core.store.retention import RetentionService

log = logging.getLogger(__name__)


@dataclass
class StoreFiles:
    commitlog: CommitLog
    queue_table: ConsumeQueueTable
    index: IndexService
    recovery: RecoveryReport

    def derived(self) -> list:
        """What is built from the CommitLog and follows it (flush before the checkpoint,
        delete_below after retention): the ConsumeQueues and the key index."""
        return [*self.queue_table.all(), self.index]


def open_files(path: str, config: StoreConfig, pending_dirs: PendingDirs) -> StoreFiles:
    """Load and recover the store's files; ``abort`` is left in place for this run."""
    abort_path = os.path.join(path, "abort")
    crashed = os.path.exists(abort_path)
    queue_table = ConsumeQueueTable(
        os.path.join(path, "consumequeue"), config.consumequeue_units_per_file,
        pending_dirs, config.consumequeue_max_mapped,
    )
    allocator = SegmentAllocator(
        os.path.join(path, "commitlog"),
        config.commitlog_segment_bytes,
        warm=config.warm_mapped_file,
        mlock=config.mlock,
        background=config.preallocate_next,
    )
    commitlog = CommitLog(allocator.directory, allocator)
    commitlog.load()
    queue_table.load()
    index = IndexService(os.path.join(path, "index"), config.index_slots,
                         config.index_entries, int(config.index_span_s * 1000), pending_dirs)
    index.load()
    report = recover(
        commitlog,
        list(queue_table.queues.values()),
        queue_table.get_or_create,
        Checkpoint.load(os.path.join(path, "checkpoint")),
        crashed,
        index,
    )
    files = StoreFiles(commitlog, queue_table, index, report)
    for derived in files.derived():
        derived.delete_below(commitlog.min_offset)
    queue_table.evict()  # recovery may have mapped every queue it replayed into
    open(abort_path, "wb").close()
    return files


class StoreServices:
    """The store's background work: the CommitLog's flush (group commit in sync mode),
    the derived files' flush with the checkpoint, retention and the disk check."""

    def __init__(self, path: str, config: StoreConfig, files: StoreFiles,
                 pending_dirs: PendingDirs, on_flush: Callable[[float], None],
                 on_disk_ratio: Callable[[float], None]) -> None:
        commitlog = files.commitlog
        self.cq_flush = ConsumeQueueFlushService(
            commitlog,
            files.derived,
            os.path.join(path, "checkpoint"),
            config.clock,
            interval_s=config.cq_flush_interval_s,
            pending_dirs=pending_dirs,
            sync_fs=partial(syncfs, path),
        )
        try:
            self.cq_flush.run_once(force=True)
        except OSError as exc:  # a full disk must not stop the store from opening
            log.warning("no checkpoint written at start of %s: %s", path, exc)
        self.flush = commitlog_flush_service(commitlog, config, on_flush)
        self.retention = RetentionService(
            commitlog,
            files.derived,
            retention_hours=config.retention_hours,
            disk_max_used_ratio=config.disk_max_used_ratio,
            wall_clock=config.clock,
            on_disk_ratio=on_disk_ratio,
            check_interval_s=config.disk_check_interval_s,
            retention_interval_s=config.retention_interval_s,
        )
        self.retention.check_disk()
        if config.background_services:
            self._running = [self.flush, self.cq_flush, self.retention]
        else:  # group commit is how sync puts complete: it always runs
            self._running = [self.flush] if config.flush == "sync" else []

    def start(self) -> None:
        for svc in self._running:
            svc.start()

    def stop(self) -> None:
        for svc in self._running:
            svc.stop()
