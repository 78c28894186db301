"""Flush services (RocketMQ's FlushRealTimeService, GroupCommitService, FlushConsumeQueueService).

* ``AsyncFlushService`` (flush="async"): every 500 ms, fdatasync the CommitLog
  if at least 4 pages are dirty; every 10 s flush whatever is dirty.
* ``GroupCommitService`` (flush="sync"): one fdatasync serves every put that
  queued while the previous one ran. Blocking callers (``wait``) take turns
  as the flushing leader; non-blocking callers (``request``) get a
  ``concurrent.futures.Future`` the service thread completes, which asyncio
  callers ``await asyncio.wrap_future(fut)``.
* ``ConsumeQueueFlushService``: every second, flush the ConsumeQueues and
  write the checkpoint (safe offset = the CommitLog's flushed offset read
  *before* the queues were flushed, so every unit below it is durable).

Each service has ``run_once`` so tests and simulations drive it directly.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

from broker_core.store.checkpoint import Checkpoint
from broker_core.store.commitlog import CommitLog
from broker_core.store.config import SYNCFS_ABOVE
from broker_core.store.libc_map import reap_retired, retired_count
from broker_core.store.mapped_file import PAGE

log = logging.getLogger(__name__)


class ServiceThread:
    """A daemon thread calling ``run_once`` every ``interval_s`` while it has work.

    With a ``bell`` (a ``threading.Event`` the store rings as its log grows or is
    flushed), a service that says it is quiet (``quiet_for``) sleeps until rung, or
    until the time it names: an idle store's threads wake for nothing (each woke
    one to two times a second to find nothing to do)."""

    name = "store-service"

    def __init__(self, interval_s: float, bell: threading.Event | None = None) -> None:
        self.interval_s = interval_s
        self.bell = bell
        self.parked = False  # asleep until rung, no timeout (what an idle store's are)
        self.rounds = 0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _wake(self) -> None:
        if self.bell is not None:
            self.bell.set()

    def quiet_for(self) -> float | None:
        """None: there is work (run after the interval); else seconds to sleep unless
        rung first (``math.inf``: until rung)."""
        return None

    def _loop(self) -> None:
        bell = self.bell
        while not self._stopped.is_set():
            if bell is not None:
                bell.clear()  # before looking: a ring from here on is not missed
                quiet = self.quiet_for()
                if quiet is not None:
                    self.parked = quiet == math.inf
                    bell.wait(None if self.parked else quiet)
                    self.parked = False
                    if quiet == math.inf or bell.is_set():
                        continue  # rung (or stopped): look again
            if self._stopped.wait(self.interval_s):
                return
            self.rounds += 1
            self._run_safely()

    def _run_safely(self) -> None:
        try:
            self.run_once()
        except Exception:  # a service must outlive one bad round; the cause is logged
            log.exception("%s round failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError


class AsyncFlushService(ServiceThread):
    name = "flush-async"

    def __init__(
        self,
        commitlog: CommitLog,
        on_flush: Callable[[float], None],
        *,
        interval_s: float = 0.5,
        min_pages: int = 4,
        thorough_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(interval_s, commitlog.bell("grew"))
        self.commitlog = commitlog
        self.on_flush = on_flush
        self.min_pages = min_pages
        self.thorough_interval_s = thorough_interval_s
        self.clock = clock
        self._last_thorough = clock()

    def request(self, offset: int) -> Future:
        """Future -> True once the log is durable up to ``offset``; never blocks. An
        explicit request (e.g. before an ack that must be durable): a helper thread
        flushes now rather than at the next interval."""
        fut: Future = Future()
        if self.commitlog.flushed_offset >= offset:
            fut.set_result(True)
            return fut

        def flush() -> None:
            try:
                self.commitlog.flush()
                _settle(fut, True)
            except OSError as exc:
                _settle(fut, exc)

        threading.Thread(target=flush, name="flush-on-request", daemon=True).start()
        return fut

    def wait(self, offset: int, timeout: float) -> bool:
        """Block until durable up to ``offset``; False on timeout."""
        try:
            return self.request(offset).result(timeout)
        except TimeoutError:
            return False

    def quiet_for(self) -> float | None:
        """Nothing unflushed: asleep until the log grows."""
        cl = self.commitlog
        return math.inf if cl.write_offset <= cl.flushed_offset else None

    def run_once(self) -> bool:
        """Flush if enough is dirty (or the thorough interval passed); True if it flushed."""
        cl = self.commitlog
        now = self.clock()
        thorough = now - self._last_thorough >= self.thorough_interval_s
        if thorough:
            self._last_thorough = now
        dirty_pages = cl.write_offset // PAGE - cl.flushed_offset // PAGE
        if cl.write_offset <= cl.flushed_offset or (dirty_pages < self.min_pages and not thorough):
            return False
        t0 = time.perf_counter()
        cl.flush()
        self.on_flush(time.perf_counter() - t0)
        return True


class GroupCommitService(ServiceThread):
    name = "flush-group-commit"

    def __init__(self, commitlog: CommitLog, on_flush: Callable[[float], None]) -> None:
        super().__init__(0.0)
        self.commitlog = commitlog
        self.on_flush = on_flush
        # Fault injection: extra seconds before every fdatasync (a slow disk).
        self.injected_delay_s = 0.0
        self._cond = threading.Condition()  # the service thread waits here for requests
        self._requests: list[tuple[int, Future]] = []
        self._mutex = threading.Lock()  # guards the leader flag and the followers
        self._leader_busy = False
        self._followers: list[tuple[int, threading.Lock]] = []

    def request(self, offset: int) -> Future:
        """A future that becomes True once everything below ``offset`` is durable."""
        fut: Future = Future()
        if self.commitlog.flushed_offset >= offset:
            fut.set_result(True)
            return fut
        with self._cond:
            self._requests.append((offset, fut))
            self._cond.notify()
        return fut

    def wait(self, offset: int, timeout: float | None) -> bool:
        """Block until ``offset`` is durable; False if that took longer than ``timeout``.

        Leader/follower: a waiter that finds no flush running flushes for
        everyone queued behind it in its own thread (no hand-off to the service
        thread). Followers sleep on a gate of their own; after each flush the
        leader opens the gates it covered and promotes the next follower to
        leader, so no flush wakes a herd that goes straight back to sleep.
        """
        cl = self.commitlog
        if cl.flushed_offset >= offset:
            return True
        # real time, not an injected clock: the gates below wait on it (lock timeouts)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._mutex:
            if cl.flushed_offset >= offset:
                return True
            if self._leader_busy:
                gate = threading.Lock()
                gate.acquire()
                entry = (offset, gate)
                self._followers.append(entry)
            else:
                self._leader_busy = True
                entry = None
        if entry is not None:
            remaining = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            if not gate.acquire(timeout=remaining):
                with self._mutex:
                    if entry in self._followers:  # still queued: give up the place
                        self._followers.remove(entry)
                        return False
                gate.acquire()  # opened meanwhile: covered, or promoted to leader
            if cl.flushed_offset >= offset:
                return deadline is None or time.monotonic() <= deadline
        self._lead()  # this thread is the leader now (first come, or promoted)
        return cl.flushed_offset >= offset and (deadline is None or time.monotonic() <= deadline)

    def _lead(self) -> None:
        try:
            self._flush()
        except OSError:
            log.exception("group commit flush failed")
        finally:
            with self._mutex:
                flushed = self.commitlog.flushed_offset
                waiting = []
                for entry in self._followers:
                    if entry[0] <= flushed:
                        entry[1].release()
                    else:
                        waiting.append(entry)
                if waiting:  # the first one left leads the next flush
                    waiting.pop(0)[1].release()
                else:
                    self._leader_busy = False
                self._followers = waiting

    def _flush(self) -> int:
        if self.injected_delay_s > 0:
            time.sleep(self.injected_delay_s)
        before = self.commitlog.flushed_offset
        t0 = time.perf_counter()
        flushed = self.commitlog.flush()
        if flushed > before:
            self.on_flush(time.perf_counter() - t0)
        return flushed

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._requests and not self._stopped.is_set():
                    self._cond.wait()
                if not self._requests and self._stopped.is_set():
                    return
            try:
                settled = self.run_once()
            except Exception:  # logged; the waiters got the error through their futures
                log.exception("%s round failed", self.name)
                settled = 0
            if not settled:  # only requests beyond what is written: do not spin
                self._stopped.wait(0.005)

    def run_once(self) -> int:
        """One group commit: flush once, complete every request it covers."""
        with self._cond:
            requests, self._requests = self._requests, []
        if not requests:
            return 0
        if max(offset for offset, _ in requests) <= self.commitlog.flushed_offset:
            for _, fut in requests:  # already covered by the flush that just ended
                _settle(fut, True)
            return len(requests)
        try:
            flushed = self._flush()
        except OSError as exc:
            for _, fut in requests:
                _settle(fut, exc)
            raise
        late = []
        for offset, fut in requests:
            if offset <= flushed:
                _settle(fut, True)
            else:
                late.append((offset, fut))
        if late:
            with self._cond:
                self._requests[:0] = late
        return len(requests) - len(late)


def _settle(fut: Future, outcome) -> None:
    try:
        if isinstance(outcome, BaseException):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
    except InvalidStateError:  # the waiter cancelled (e.g. an asyncio task was cancelled)
        pass




class ConsumeQueueFlushService(ServiceThread):
    name = "flush-consume-queue"

    def __init__(
        self,
        commitlog: CommitLog,
        queues: Callable[[], list],
        checkpoint_path: str,
        wall_clock: Callable[[], float],
        *,
        interval_s: float = 1.0,
        pending_dirs=None,
        sync_fs: Callable[[], None] | None = None,
    ) -> None:
        """`sync_fs`: flush the store's whole filesystem at once (fsutil.syncfs), used
        over SYNCFS_ABOVE files: a flush per file was a journal commit each."""
        super().__init__(interval_s, commitlog.bell("flushed"))
        self.sync_fs = sync_fs
        self.commitlog = commitlog
        self.queues = queues
        self.pending_dirs = pending_dirs  # fsutil.PendingDirs: synced before the checkpoint
        self.checkpoint_path = checkpoint_path
        self.wall_clock = wall_clock
        self.last_saved: int | None = None
        self._lock = threading.Lock()
        # where the oldest record whose queue units wait for the slaves starts (None:
        # none waits; store.confirm_gate): the checkpoint stays there, so recovery
        # rebuilds those units
        self.bound: Callable[[], int | None] = lambda: None

    def quiet_for(self) -> float | None:
        """The checkpoint is at the flushed offset and no mapping waits to be let go:
        asleep until the CommitLog flushes more."""
        if self.commitlog.flushed_offset != self.last_saved or retired_count():
            return None
        return math.inf

    def run_once(self, force: bool = False) -> int:
        """Flush queues and save the checkpoint; returns the safe offset recorded."""
        reap_retired()  # queue mappings the LRU let go of, past their grace period
        with self._lock:
            safe = self.commitlog.flushed_offset
            bound = self.bound()
            if bound is not None and bound < safe:
                safe = bound
            if safe == self.last_saved and not force:
                return safe
            derived = self.queues()
            if self.sync_fs is not None and len(derived) > SYNCFS_ABOVE:
                self.sync_fs()  # every queue and index file, and their directories
            else:
                for d in derived:
                    d.flush()
            if self.pending_dirs is not None:
                self.pending_dirs.sync()  # new files' names: durable before counted on
            Checkpoint(safe, safe, int(self.wall_clock() * 1000)).save(self.checkpoint_path)
            self.last_saved = safe
            return safe


def commitlog_flush_service(commitlog: CommitLog, config, on_flush: Callable[[float], None]):
    """The CommitLog's flush service for a StoreConfig: group commit (sync flush, which
    answers a put once durable) or periodic flushes (async)."""
    if config.flush == "sync":
        return GroupCommitService(commitlog, on_flush)
    return AsyncFlushService(commitlog, on_flush, interval_s=config.flush_interval_s,
                             min_pages=config.flush_min_pages,
                             thorough_interval_s=config.flush_thorough_interval_s)
