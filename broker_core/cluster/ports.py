"""Free loopback ports for local clusters, tests and benches.

Ranges are drawn below Linux's ephemeral range (32768-): a broker restarted on
its old port must not find it taken as the local end of some client's
connection meanwhile (seen in drop-and-restart tests).

A port found free is bound later, by the process started on it: two drawers at once
could be handed the same one. Within a process, a range handed out is not handed out
again while it is among the last RECENT; between processes, FLOODGATE_PORTS=LOW-HIGH
narrows where this one draws (the test suite gives each of its parallel workers a
share: one worker's broker found its port taken by another's, once in a few runs).
"""

from __future__ import annotations

import os
import random
import socket
from collections import deque
from itertools import chain

LOW, HIGH = 20000, 32000  # under net.ipv4.ip_local_port_range's default start
RECENT = 64  # ranges this process handed out, not handed out again meanwhile
_handed: deque[tuple[int, int]] = deque(maxlen=RECENT)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def span() -> tuple[int, int]:
    """[low, high) this process draws from: FLOODGATE_PORTS=LOW-HIGH, else LOW-HIGH."""
    raw = os.environ.get("FLOODGATE_PORTS")
    if not raw:
        return LOW, HIGH
    try:
        low, high = (int(x) for x in raw.split("-"))
    except ValueError:
        raise ValueError(f"FLOODGATE_PORTS={raw!r}: not LOW-HIGH") from None
    if not 1024 <= low < high <= 65536:
        raise ValueError(f"FLOODGATE_PORTS={raw!r}: not within 1024-65536, low < high")
    return low, high


def free_port_range(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports, chosen at random in `span()` (each
    base after 200 random tries), none in a range this process handed out lately."""
    low, high = span()
    bases = range(low, high - count + 1)

    def fits(base: int) -> bool:
        return not any(base < end and start < base + count for start, end in _handed) \
            and all(port_free(p, host) for p in range(base, base + count))

    tries = [random.choice(bases) for _ in range(200)] if bases else []
    for base in chain(tries, bases):
        if fits(base):
            _handed.append((base, base + count))
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{high}")
