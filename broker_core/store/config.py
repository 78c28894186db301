"""StoreConfig: every knob of the MessageStore, validated in one place."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.errors import StoreConfigError
from broker_core.protocol.record import BLANK_MIN, FIXED_SIZE, MAX_PROPERTIES_BYTES, MAX_TOPIC_BYTES
from broker_core.store.mapped_file import PAGE

# Past this many queue and index files the checkpoint flushes the filesystem once
# (syncfs) instead of each file: a flush per file was a journal commit each, 400 a
# second at 10,000 queues; and the queues the LRU unmapped (consumequeue_max_mapped)
# are made durable by it without a descriptor of their own.
# RocketMQ's diskMaxUsedSpaceRatio (75 %) and the share past which it refuses writes (90 %):
# the console's and Prometheus' disk alerts read the same lines
DISK_MAX_USED_RATIO = 0.75
DISK_FULL_RATIO = 0.90
SYNCFS_ABOVE = 64

GiB = 1 << 30
MiB = 1 << 20


@dataclass
class StoreConfig:
    flush: str = "async"  # "async" | "sync" (group commit)
    # Operations the store times itself (store.latency): all by default; a broker that
    # times sends and pulls itself asks for "flush" only, so a send is timed once.
    timed_ops: tuple[str, ...] = ("put", "put_batch", "get", "flush")
    commitlog_segment_bytes: int = GiB
    consumequeue_units_per_file: int = 300_000
    # Queues whose files stay mapped (a mapping each, no descriptor); the least recently
    # used past it are unmapped and mapped again when used (0: no limit; a broker takes
    # a quarter of vm.max_map_count). At least SYNCFS_ABOVE: an unmapped queue's pages
    # are made durable by the checkpoint's syncfs.
    consumequeue_max_mapped: int = 16384
    retention_hours: float = 72.0
    disk_max_used_ratio: float = DISK_MAX_USED_RATIO  # above: oldest segments go even if young
    disk_full_ratio: float = DISK_FULL_RATIO  # above: puts return DISK_FULL
    max_message_bytes: int = 4 * MiB
    # Wall clock in seconds since the epoch: store timestamps and retention.
    clock: Callable[[], float] = field(default=time.time)
    flush_interval_s: float = 0.5
    flush_min_pages: int = 4
    flush_thorough_interval_s: float = 10.0
    sync_flush_timeout_s: float = 5.0
    cq_flush_interval_s: float = 1.0
    retention_interval_s: float = 10.0
    disk_check_interval_s: float = 1.0
    preallocate_next: bool = True
    warm_mapped_file: bool = False
    mlock: bool = False
    store_host: str = "127.0.0.1:10911"
    # the key index (store/index_file.py): hash slots and entries per file, and the time
    # one file covers at most; a file takes 64 + 4 x slots + 20 x entries bytes
    index_slots: int = 131_072
    index_entries: int = 1_000_000
    index_span_s: float = 3600.0
    # False: no flush/retention threads (tests drive run_once); group commit still runs.
    background_services: bool = True

    def __post_init__(self) -> None:
        if self.flush not in ("async", "sync"):
            raise StoreConfigError(f"flush must be 'async' or 'sync', got {self.flush!r}")
        unknown = set(self.timed_ops) - {"put", "put_batch", "get", "flush"}
        if unknown:
            raise StoreConfigError(f"timed_ops: unknown operation(s) {sorted(unknown)}")
        seg = self.commitlog_segment_bytes
        if not isinstance(seg, int) or seg <= 0 or seg % PAGE:
            raise StoreConfigError(f"commitlog_segment_bytes must be a positive multiple of {PAGE}")
        if not isinstance(self.max_message_bytes, int) or self.max_message_bytes < 1:
            raise StoreConfigError("max_message_bytes must be a positive int")
        biggest = self.max_message_bytes + FIXED_SIZE + MAX_TOPIC_BYTES + MAX_PROPERTIES_BYTES
        if biggest + BLANK_MIN > seg:
            raise StoreConfigError(
                f"commitlog_segment_bytes {seg} cannot hold the largest record ({biggest} bytes); "
                "lower max_message_bytes or raise the segment size"
            )
        units = self.consumequeue_units_per_file
        if not isinstance(units, int) or units < 1:
            raise StoreConfigError("consumequeue_units_per_file must be a positive int")
        mapped = self.consumequeue_max_mapped
        if not isinstance(mapped, int) or not (mapped == 0 or mapped >= SYNCFS_ABOVE):
            raise StoreConfigError(f"consumequeue_max_mapped must be 0 (no limit) or an int "
                                   f">= {SYNCFS_ABOVE}, got {mapped!r}")
        if not 0 < self.disk_max_used_ratio <= self.disk_full_ratio <= 1:
            raise StoreConfigError("need 0 < disk_max_used_ratio <= disk_full_ratio <= 1")
        if self.retention_hours <= 0:
            raise StoreConfigError("retention_hours must be positive")
        for name in ("index_slots", "index_entries"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value < 2**31:
                raise StoreConfigError(f"{name} must be an int in [1, 2**31)")
        if not 0 < self.index_span_s <= 40 * 86400:
            raise StoreConfigError("index_span_s must be in (0, 40 days]")
        if self.sync_flush_timeout_s <= 0:
            raise StoreConfigError("sync_flush_timeout_s must be positive")
