"""MessageStore: the broker's storage API over the CommitLog, ConsumeQueues and services.

Layout under the data dir: ``commitlog/`` segments, ``consumequeue/<topic>/<queue_id>/``
files, ``checkpoint``, ``abort`` (present while open: found at start = the last
run crashed) and ``lock`` (flock'd: a second store on the dir fails).

Concurrency: ``put``/``put_batch``/``get`` may be called from any number of
threads. Appends are serialised by one put lock; validation and encoding
happen before it, the wait for a sync flush after it. For an asyncio server,
``put(..., wait=False)`` never blocks on the disk: it returns as soon as the
record is appended (status PUT_OK, not yet durable in sync mode), and
``flushed_future(result.end_offset)`` gives a concurrent.futures.Future to
``await asyncio.wait_for(asyncio.wrap_future(fut), config.sync_flush_timeout_s)``
(timing out there means FLUSH_DISK_TIMEOUT). ``wait_flushed`` is the
blocking form.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from concurrent.futures import Future
from time import perf_counter

from broker_core.errors import MessageIllegalError, StoreClosedError
from broker_core.fsutil import PendingDirs
from broker_core.protocol.record import pack_host, prepare, prepare_batch
from broker_core.store.config import StoreConfig
from broker_core.store.confirm_gate import ConfirmGate
from broker_core.store.index_service import split_keys
from broker_core.store.latency import LatencyRecorder
from broker_core.store.lockfile import take_lock
from broker_core.store.lookup import StoreLookups
from broker_core.store.opening import StoreServices, open_files
from broker_core.store.reader import get_result, read_queue, read_queue_records
from broker_core.store.replica import ReplicaLog
from broker_core.store.results import GetResult, GetStatus, PutResult, PutStatus
from broker_core.store.tags import TagFilter

log = logging.getLogger(__name__)


class MessageStore(StoreLookups):
    def __init__(self, path: str | os.PathLike, config: StoreConfig | None = None) -> None:
        self.path = os.fspath(path)
        self.config = config = config or StoreConfig()
        os.makedirs(self.path, exist_ok=True)
        self._lock_fd = take_lock(os.path.join(self.path, "lock"))
        self._closed = False
        try:
            self._open(config)
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _open(self, config: StoreConfig) -> None:
        self._clock = config.clock
        self._max_body = config.max_message_bytes
        self._sync = config.flush == "sync"
        self._store_host = pack_host(config.store_host)
        self._put_lock = threading.Lock()
        self._replica: ReplicaLog | None = None
        # a sync master's (ha.master): queue units wait for the in-sync slaves' acks
        self.gate: ConfirmGate | None = None
        self._stats_lock = threading.Lock()
        self.latency_recorder = LatencyRecorder()
        timed = set(self.config.timed_ops)
        self._time_put, self._time_batch = "put" in timed, "put_batch" in timed
        self._time_get, self._time_flush = "get" in timed, "flush" in timed
        self.counters = dict.fromkeys(
            ("puts", "put_msgs", "put_bytes", "put_failures", "flush_timeouts", "gets",
             "get_msgs", "corrupt_reads"), 0,
        )  # fmt: skip
        self.disk_used_ratio = 0.0
        self.disk_full = False

        # derived files' new names are made durable with the next checkpoint, not on
        # the thread that makes them (the broker's loop)
        self.pending_dirs = PendingDirs()
        files = open_files(self.path, config, self.pending_dirs)
        self.commitlog, self.queue_table, self.index = files.commitlog, files.queue_table, files.index
        self._queues = self.queue_table.queues  # (topic, queue id) -> ConsumeQueue
        self.recovery = files.recovery
        self._services = services = StoreServices(self.path, config, files, self.pending_dirs,
                                                  self._record_flush, self._set_disk_ratio)
        self.cq_flush, self.flush_service, self.retention = (services.cq_flush, services.flush,
                                                             services.retention)
        self.cq_flush.bound = lambda: self.gate.first_held() if self.gate is not None else None
        services.start()
        # the segment the next roll takes, ready in the background: also the first one of
        # a new store (made on the first put, it held the put, and a slave's first copy)
        active = self.commitlog.active
        self.commitlog.allocator.prepare(active.end_offset if active is not None
                                         else self.commitlog.write_offset)

    def _set_disk_ratio(self, ratio: float) -> None:
        self.disk_used_ratio = ratio
        self.disk_full = ratio > self.config.disk_full_ratio

    def _record_flush(self, seconds: float) -> None:
        if self._time_flush:
            self.latency_recorder.record("flush", seconds)

    # -- writing ------------------------------------------------------------
    def put(self, topic, queue_id, body, tags=None, keys=None, properties=None, *,
            wait: bool = True, born_timestamp: int | None = None) -> PutResult:  # fmt: skip
        """Append one message. In sync mode waits for the group commit unless wait=False."""
        t0 = perf_counter() if self._time_put else 0.0
        try:
            p = prepare(topic, queue_id, body, tags, keys, properties, self._max_body)
        except (MessageIllegalError, TypeError) as exc:
            return self._failed(PutStatus.MESSAGE_ILLEGAL, str(exc))
        result = self._append(topic, queue_id, [p], born_timestamp, wait, split_keys(keys))
        if self._time_put:
            self.latency_recorder.record("put", perf_counter() - t0)
        return result

    def put_batch(self, topic, queue_id, bodies, tags=None, keys=None, properties=None, *,
                  wait: bool = True, born_timestamp: int | None = None) -> PutResult:  # fmt: skip
        """Append several messages to one queue in one go (consecutive queue offsets).

        Returns one PutResult: offsets are those of the first message,
        ``count`` how many were stored, ``end_offset`` just past the last.
        The bodies together must fit in max_message_bytes; the batch is
        written as one block in one segment, all of it or none of it.
        """
        t0 = perf_counter()
        try:
            prepared = prepare_batch(topic, queue_id, bodies, tags, keys, properties,
                                     self._max_body, self.config.commitlog_segment_bytes)
        except (MessageIllegalError, TypeError) as exc:
            return self._failed(PutStatus.MESSAGE_ILLEGAL, str(exc))
        result = self._append(topic, queue_id, prepared, born_timestamp, wait, split_keys(keys))
        if self._time_batch:
            self.latency_recorder.record("put_batch", perf_counter() - t0)
        return result

    def _failed(self, status: PutStatus, reason: str) -> PutResult:
        with self._stats_lock:
            self.counters["put_failures"] += 1
        return PutResult(status, reason=reason)

    def put_prepared(self, topic: str, queue_id: int, prepared: list, keys: list[str], *,
                     wait: bool = False, each_keys: list[list[str]] | None = None
                     ) -> PutResult:
        """Append records the caller prepared and validated (`message.prepare_raw`, the
        broker's send path: it keeps each property set encoded once). `keys`: every
        record's index keys; `each_keys`: instead, each record's own (SEND_MULTI)."""
        return self._append(topic, queue_id, prepared, None, wait, keys, each_keys)

    def _append(self, topic, queue_id, prepared, born_ts, wait, keys,
                each_keys=None) -> PutResult:
        """Write prepared records as one contiguous block of one segment (all or nothing)."""
        if self.disk_full:
            return self._failed(
                PutStatus.DISK_FULL, f"disk {self.disk_used_ratio:.0%} used, over the full ratio"
            )
        cl = self.commitlog
        c = self.counters
        n = len(prepared)
        total = prepared[0][0] if n == 1 else sum(p[0] for p in prepared)
        with self._put_lock:
            if self._closed:
                return self._failed(PutStatus.SERVICE_NOT_AVAILABLE, "store is closed")
            cq = self._queues.get((topic, queue_id)) or self.queue_table.get_or_create(
                topic, queue_id
            )
            now_ms = int(self._clock() * 1000)
            try:
                cq.ensure_capacity(n)
                if not cl.fits(total):
                    cl.roll()  # before anything is written: may raise ENOSPC
                    self.retention.check_disk()
            except OSError as exc:
                self.retention.check_disk()
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    return self._failed(PutStatus.DISK_FULL, f"cannot allocate: {exc}")
                # out of descriptors, say (EMFILE): not a full disk, and not the caller's
                return self._failed(PutStatus.SERVICE_NOT_AVAILABLE,
                                    f"cannot open the queue's files: {exc}")
            gate = self.gate  # (held while active, and until what it held is out)
            held = gate is not None and (gate.active or gate.waiting)
            first_qo = cq.max_offset + gate.waiting.get((topic, queue_id), 0) if held \
                else cq.max_offset
            phys = first_phys = cl.write_records(prepared, queue_id, first_qo,
                                                 now_ms if born_ts is None else born_ts,
                                                 now_ms, self._store_host)
            units, keyed = [], []  # (held: found by key once readable, as by queue)
            for i, p in enumerate(prepared):
                its_keys = keys or (each_keys[i] if each_keys is not None else None)
                if held:
                    units.append((phys, p[0], p[4]))
                    if its_keys:
                        keyed.append((its_keys, phys, now_ms))
                else:
                    cq.append_unit(phys, p[0], p[4])
                    if its_keys:
                        self.index.add(its_keys, phys, now_ms)
                phys += p[0]
            cl.commit(phys)
            if held:
                gate.hold(topic, queue_id, units, phys, keyed)
            table = self.queue_table
            table.touch(cq)
            if table.over:
                table.evict(keep=cq)
            c["puts"] += 1
            c["put_msgs"] += n
            c["put_bytes"] += total
        status = PutStatus.PUT_OK
        if wait and self._sync:
            if not self.flush_service.wait(phys, self.config.sync_flush_timeout_s):
                status = PutStatus.FLUSH_DISK_TIMEOUT
                with self._stats_lock:
                    c["flush_timeouts"] += 1
        return PutResult(status, first_phys, first_qo, now_ms, phys, n)

    def flushed_future(self, offset: int) -> Future:
        """Future -> True once the CommitLog is durable up to ``offset``; never blocks
        (sync mode: the group commit completes it; async: a flush on request)."""
        return self.flush_service.request(offset)

    def wait_flushed(self, offset: int, timeout: float | None = None) -> bool:
        """Block until durable up to ``offset``; False on timeout (default sync_flush_timeout_s)."""
        timeout = self.config.sync_flush_timeout_s if timeout is None else timeout
        return self.flush_service.wait(offset, timeout)

    def confirm(self, upto: int | None) -> set[tuple[str, int]]:
        """The queue units the gate held for records ending at or before `upto` (None:
        all) put in their queues: the queues readers may now read further."""
        gate = self.gate
        if gate is None or not gate.holding:
            return set()
        with self._put_lock:
            if self._closed:  # (the next start rebuilds them from the checkpoint's bound)
                return set()
            return gate.release(upto, lambda t, q: self._queues.get((t, q))
                                or self.queue_table.get_or_create(t, q), self.index)

    # -- replication ----------------------------------------------------------
    def replica_log(self) -> ReplicaLog:
        """The slave's writer of replicated bytes (and the log's truncation), made once."""
        if self._replica is None:
            self._replica = ReplicaLog(self.commitlog, self.queue_table, self._put_lock,
                                       lambda: self.cq_flush.run_once(force=True), self.index)
        return self._replica

    # -- reading ------------------------------------------------------------
    def get(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
            tag: str | None = None) -> GetResult:  # fmt: skip
        """Read up to ``max_msgs`` messages of one queue from ``offset`` (optional tag filter)."""
        if not self._time_get:
            return self._get(topic, queue_id, offset, max_msgs, tag)
        t0 = perf_counter()
        result = self._get(topic, queue_id, offset, max_msgs, tag)
        self.latency_recorder.record("get", perf_counter() - t0)
        return result

    def get_records(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                    tag: str | None = None) -> GetResult:
        """get() with the records as stored (bytes, header-checked, CRC not verified)
        instead of decoded messages: what a PULL answer carries."""
        return self._get(topic, queue_id, offset, max_msgs, tag, read_queue_records)

    def _get(self, topic, queue_id, offset, max_msgs, tag, read=read_queue) -> GetResult:
        if self._closed:
            raise StoreClosedError("store is closed")
        if type(max_msgs) is not int or max_msgs < 1:
            raise MessageIllegalError(f"max_msgs must be a positive int, got {max_msgs!r}")
        if type(offset) is not int:
            raise MessageIllegalError(f"offset must be an int, got {offset!r}")
        cq = self._queues.get((topic, queue_id))
        if cq is not None:
            self.queue_table.touch(cq)
        result, corrupt = get_result(self.commitlog, cq, offset, max_msgs,
                                     TagFilter.parse(tag), read)
        with self._stats_lock:
            self.counters["corrupt_reads"] += corrupt
            if result.messages:
                self.counters["gets"] += 1
                self.counters["get_msgs"] += len(result.messages)
        return result

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message put into this queue takes (after the records
        a sync master or raft leader holds at its gate)."""
        cq = self._queues.get((topic, queue_id))
        end = cq.max_offset if cq is not None else 0
        if self.gate is not None and self.gate.waiting:
            end += self.gate.waiting.get((topic, queue_id), 0)
        return end

    def log_end(self) -> int:
        """Where this store's log ends: its last whole record, held at the gate or not (a
        leader commits all of it: its idempotent sends are read to there)."""
        return self.commitlog.write_offset

    def queue_unit(self, topic: str, queue_id: int, offset: int) -> int:
        """The physical offset of the queue's message at `offset` (within its bounds)."""
        return self._queues[(topic, queue_id)].unit(offset)[0]

    def queue_offsets(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min_offset, max_offset) of a queue; (0, 0) if it never got a message."""
        cq = self._queues.get((topic, queue_id))
        return (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)

    def queues(self) -> list[tuple[str, int]]:
        return sorted(self._queues)

    def drop_topic(self, topic: str) -> int:
        """Delete the ConsumeQueues of `topic` (an operator deleted it); its messages stay
        in the CommitLog until retention, found by key or id. The checkpoint is written at
        once, so a restart does not rebuild the queues from the CommitLog. Returns how
        many queues went."""
        with self._put_lock:
            dropped = self.queue_table.drop_topic(topic)
        if dropped:
            self.cq_flush.run_once(force=True)
        return dropped

    # -- stats ----------------------------------------------------------------
    @property
    def latency(self) -> dict:
        """op ('put', 'put_batch', 'get', 'flush') -> LatencyHistogram since the last take."""
        return self.latency_recorder.histograms()

    def take_latency(self) -> dict:
        """Each op's OpLatency since the last call, reset (the broker's per-second figures)."""
        return self.latency_recorder.take()

    def stats(self) -> dict:
        cl = self.commitlog
        hists = self.latency
        over = self.latency_recorder.over_20ms
        return {
            "path": self.path,
            "flush": self.config.flush,
            "commitlog": {
                "min_offset": cl.min_offset,
                "max_offset": cl.write_offset,
                "flushed_offset": cl.flushed_offset,
                "segments": len(cl.segments),
                "segment_bytes": self.config.commitlog_segment_bytes,
            },
            "queues": len(self._queues),
            "disk": {
                "used_ratio": self.disk_used_ratio,
                "full": self.disk_full,
                "bytes_on_disk": sum(s.size for s in cl.segments),
            },
            "counters": dict(self.counters),
            "over_20ms": over,
            "puts_over_20ms": over["put"],
            "latency": {op: h.summary(suffix="_s") for op, h in hists.items()},
            "recovery": self.recovery.to_dict(),
        }

    # -- lifecycle ------------------------------------------------------------
    def close(self) -> None:
        """Stop services, flush everything, write the checkpoint, remove abort, unlock."""
        if self._closed:
            return
        with self._put_lock:
            self._closed = True
        self._services.stop()
        clean = True
        try:
            self.commitlog.flush()
            self.cq_flush.run_once(force=True)
        except OSError as exc:  # e.g. no room for the checkpoint: next start re-verifies
            log.warning("store %s closed without a final checkpoint: %s", self.path, exc)
            clean = False
        finally:
            self.commitlog.allocator.discard()
            self.commitlog.close()
            for cq in self._queues.values():
                cq.close()
            self.index.close()
            if clean:
                os.unlink(os.path.join(self.path, "abort"))
            os.close(self._lock_fd)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["GetResult", "GetStatus", "MessageStore", "PutResult", "PutStatus", "StoreConfig"]
