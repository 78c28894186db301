"""A port range with one port held, for the tests of what a port in use is refused with."""

from __future__ import annotations

import contextlib
import socket

from broker_core.cluster.ports import free_port_range


@contextlib.contextmanager
def a_port_taken(count: int, which: int):
    """The first of `count` free ports, port `which` of them held by a listening socket
    (another worker may bind a port between the check and this bind: drawn again)."""
    for _ in range(20):
        base = free_port_range(count)
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", base + which))
        except OSError:
            taken.close()
            continue
        with taken:
            taken.listen()
            yield base
        return
    raise AssertionError(f"no {count} free ports to hold one of")
