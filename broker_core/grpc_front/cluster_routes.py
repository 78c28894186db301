"""A RocketMQ client's route across a cluster (`broker serve --grpc-routes FILE`, which
`cluster up --grpc` gives each broker): every group's master now, with the topic's
queues there and its gRPC endpoint, so a client that reaches one broker sends to all of
them, and after a failover (its next route refresh) to the new master.

Asked when a client asks (QueryRoute: every 30 s a client, and when it starts), in a
thread off the broker's loop, and kept for `TTL_S`: no timer and no standing
connection (an idle broker spends nothing on it). A group none of whose members
answers as master is left out of the route until it has one again.
"""

from __future__ import annotations

import time
from pathlib import Path

from broker_core.cluster.cluster_file import BrokerEntry, load_cluster
from broker_core.errors import BrokerError

TTL_S = 2.0


class ClusterRoutes:
    def __init__(self, path: str | Path, clock=time.monotonic) -> None:
        self.path, self.clock = Path(path), clock
        self._cache: dict[str, tuple[float, list[tuple[str, BrokerEntry, int]]]] = {}

    def route(self, topic: str) -> list[tuple[str, BrokerEntry, int]]:
        """[(the group's name, its master's entry, the topic's queues there)]; BrokerError
        when the cluster file cannot be read."""
        hit = self._cache.get(topic)
        if hit is not None and self.clock() - hit[0] < TTL_S:
            return hit[1]
        from broker_core.cluster.roles import asker

        spec = load_cluster(self.path)
        ask = asker(spec)  # (the cluster's admin and CA, where it takes users or TLS)
        out = []
        for name, members in sorted(spec.groups.items()):
            master = members[0] if len(members) == 1 else _master(members, ask)
            if master is None or not master.grpc:
                continue
            queues = _queues(master.addr, topic, ask)
            if queues:
                out.append((name, master, queues))
        self._cache[topic] = (self.clock(), out)
        return out


def _master(members: list[BrokerEntry], ask: dict) -> BrokerEntry | None:
    from broker_core.cluster.roles import broker_role

    return next((b for b in members
                 if broker_role(b.addr, 0.5, **ask).get("role") == "MASTER"), None)


def _queues(addr: str, topic: str, ask: dict) -> int:
    """The topic's queues on that broker (created there when it creates topics)."""
    from broker_core.client.connection import Connection
    from broker_core.protocol import Code, Op, decode_json, encode_json

    conn = Connection(addr, connect_timeout=0.5, **ask)
    try:
        code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": True}), 1.0)
        return int(decode_json(body)["queues"]) if code == Code.OK else 0
    except (BrokerError, OSError, TimeoutError, KeyError, ValueError):
        return 0
    finally:
        conn.close()
