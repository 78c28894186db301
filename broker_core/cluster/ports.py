"""Free loopback ports for local clusters, tests and benches.

Ranges are drawn below Linux's ephemeral range (32768-): a broker restarted on
its old port must not find it taken as the local end of some client's
connection meanwhile (seen in drop-and-restart tests).
"""

from __future__ import annotations

import random
import socket

LOW, HIGH = 20000, 32000  # under net.ipv4.ip_local_port_range's default start


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_range(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports, chosen at random in [LOW, HIGH)."""
    for _ in range(200):
        base = random.randrange(LOW, HIGH - count)
        if all(port_free(p, host) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {LOW}-{HIGH}")
