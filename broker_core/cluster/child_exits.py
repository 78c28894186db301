"""Wait for a child process to exit, or to be woken, without polling.

A supervisor that looked at its children five times a second woke 5 times a
second for nothing; here one `select` waits on each child's pidfd (Linux 5.3+:
readable once the process has exited) and on a self-pipe that `wake` writes to
(the supervisor's stop). Where pidfds are missing it looks twice a second.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
from collections.abc import Iterable

FALLBACK_S = 0.5


class ExitWatch:
    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._fds: dict[int, int] = {}  # pid -> its pidfd

    def wake(self) -> None:
        """Return from `wait` now (safe from a signal handler or another thread)."""
        with contextlib.suppress(OSError):  # full pipe: a wake is pending already
            os.write(self._w, b"!")

    def wait(self, procs: Iterable[subprocess.Popen], timeout: float | None = None) -> None:
        """Until one of `procs` has exited (it may be reaped by `poll` after), `wake`
        is called, or `timeout` passes."""
        fds = [self._r]
        live = set()
        for proc in procs:
            live.add(proc.pid)
            fd = self._pidfd(proc)
            if fd is None:
                timeout = FALLBACK_S if timeout is None else min(timeout, FALLBACK_S)
            else:
                fds.append(fd)
        for pid in set(self._fds) - live:  # reaped and gone: its pidfd too
            os.close(self._fds.pop(pid))
        select.select(fds, [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._r, 512):
                pass

    def _pidfd(self, proc: subprocess.Popen) -> int | None:
        fd = self._fds.get(proc.pid)
        if fd is None and proc.returncode is None and hasattr(os, "pidfd_open"):
            try:
                fd = self._fds[proc.pid] = os.pidfd_open(proc.pid)
            except OSError:  # exited and reaped meanwhile, or no pidfds here
                return None
        return fd

    def close(self) -> None:
        for fd in (*self._fds.values(), self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
