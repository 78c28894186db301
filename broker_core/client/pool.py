"""Connections to several brokers: a pool that opens one per broker when first asked for
and follows a group's new master, and `serve_any`, one thread reading the answers of
several brokers' connections as they come (client.connection is one connection).
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Mapping

from broker_core.client.connection import BrokerUnavailable, Connection


def serve_any(conns: list[Connection], timeout: float) -> None:
    """Wait up to `timeout` for any of `conns` to have an answer, and read those that do:
    one thread serving its own watched requests on several brokers, no pump threads."""
    ready = [conn for conn in conns if conn.pending()]
    if ready:  # already decrypted (TLS): read now, poll would not wake for it
        for conn in ready:
            conn.serve()
        return
    poller = select.poll()
    by_fd = {}
    for conn in conns:
        fd = conn.fileno()
        if fd >= 0:
            by_fd[fd] = conn
            poller.register(fd, select.POLLIN)
    if not by_fd:
        time.sleep(min(timeout, 0.05))
        return
    for fd, _ev in poller.poll(max(0.0, timeout) * 1000.0):
        by_fd[fd].serve()


class ConnectionPool:
    """One lazily opened Connection per broker (`credentials`: each authenticates with
    them; None: the process's, FLOODGATE_CREDENTIALS)."""

    def __init__(self, brokers: Mapping[str, str], credentials=None) -> None:
        self.addrs = dict(brokers)
        self.credentials = credentials
        self._conns: dict[str, Connection] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Connection:
        conn = self._conns.get(name)
        if conn is None:
            if not self.addrs.get(name):
                raise BrokerUnavailable(f"{name}: no address (a group without a master?)")
            with self._lock:
                conn = self._conns.get(name) or self._conns.setdefault(
                    name, Connection(self.addrs[name], credentials=self.credentials))
        return conn

    def reroute(self, name: str, addr: str) -> None:
        """`name` is now at `addr` (its group's new master): the old link goes."""
        with self._lock:
            self.addrs[name] = addr
            old = self._conns.pop(name, None)
        if old is not None:
            old.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
