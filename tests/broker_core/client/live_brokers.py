"""Real brokers for the producers' tests: stores and TCP servers on one event loop in a
thread of their own (`Brokers`), and what a topic holds, read back with PULLs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from broker_core.client.connection import Connection
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.readback import read_queue_bodies
from broker_core.protocol import Code, Op, decode_json, encode_json
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.tcp import start_tcp

MAX_BYTES = 8 * 1024  # the brokers' message size limit


class Brokers:
    """Real brokers (store and TCP server) on one event loop in a thread of their own.
    Their state is changed on that loop (`call`), where their own handlers change it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="test-brokers")
        self.thread.start()
        self.running: dict[str, tuple[Broker, asyncio.AbstractServer]] = {}

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(20)

    def call(self, fn, *args):
        async def on_loop():
            return fn(*args)

        return self._run(on_loop())

    def start(self, name: str) -> str:
        async def up():
            port = free_port_range(2)
            broker = Broker(BrokerConfig(
                name, self.root / name, port=port, http_port=port + 1, segment_bytes=1 << 20,
                store_extra={"max_message_bytes": MAX_BYTES, "preallocate_next": False}))
            server = await start_tcp(broker)
            broker.serving = True
            return broker, server

        self.running[name] = self._run(up())
        return self.addr(name)

    def stop(self, name: str) -> None:
        """Down as a killed broker is: the port refuses, open connections are cut."""
        broker, server = self.running.pop(name)

        def down():
            server.close()
            for conn in list(broker.connections):
                if conn.transport is not None:
                    conn.transport.close()
            broker.close()

        self.call(down)

    def __getitem__(self, name: str) -> Broker:
        return self.running[name][0]

    def addr(self, name: str) -> str:
        return self[name].config.addr

    @property
    def addrs(self) -> dict[str, str]:
        return {name: self.addr(name) for name in ("b1", "b2")}

    def close(self) -> None:
        for name in list(self.running):
            self.stop(name)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def stored(addr: str, topic: str) -> dict[int, list[bytes]]:
    """What `topic`'s queues hold on the broker at `addr`, read back with PULLs."""
    conn = Connection(addr)
    try:
        code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": False}), 5.0)
        if code == Code.TOPIC_NOT_EXIST:
            return {}
        return {q: list(read_queue_bodies(conn, topic, q))
                for q in range(int(decode_json(body)["queues"]))}
    finally:
        conn.close()


def bodies(addr: str, topic: str) -> list[bytes]:
    return sorted(b for queue in stored(addr, topic).values() for b in queue)
