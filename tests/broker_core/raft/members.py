"""In-process Raft groups: real brokers (store, TCP, Raft port) on one event loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from broker_core.cluster.ports import free_port_range
from broker_core.ha.node import Role
from broker_core.raft.stream_group import StreamGroup
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.tcp import start_tcp


@dataclass
class Member:
    broker: Broker
    group: StreamGroup
    tcp: object

    @property
    def addr(self) -> str:
        return self.broker.config.addr

    @property
    def name(self) -> str:
        return self.broker.config.name

    async def close(self) -> None:
        self.tcp.close()
        await self.group.close()
        self.broker.close()


class Group:
    """Three (or `size`) members of raft group "g" under `root`; `start(name)` (again)."""

    def __init__(self, root: Path, size: int = 3, flush: str = "async") -> None:
        self.root, self.flush = root, flush
        self.names = [f"r{i}" for i in range(size)]
        base = free_port_range(3 * size)
        self.ports = {n: (base + 3 * i, base + 3 * i + 1, base + 3 * i + 2)
                      for i, n in enumerate(self.names)}  # client, http, raft
        self.members: dict[str, Member] = {}

    async def start(self, name: str) -> Member:
        client, http, raft = self.ports[name]
        config = BrokerConfig(name=name, data_dir=self.root / name, port=client,
                              http_port=http, segment_bytes=64 * 1024, flush=self.flush,
                              store_extra={"max_message_bytes": 8 * 1024,
                                           "preallocate_next": False})
        broker = Broker(config)
        peers = {n: ("127.0.0.1", p[2]) for n, p in self.ports.items() if n != name}
        addrs = {n: f"127.0.0.1:{p[0]}" for n, p in self.ports.items()}
        members = tuple(f"{n}=127.0.0.1:{p[0]}:{p[2]}" for n, p in self.ports.items())
        try:
            group = StreamGroup(broker, "g", peers, raft, client_addrs=addrs,
                                members=members).attach()
        except BaseException:
            broker.close()
            raise
        await group.start("127.0.0.1")
        tcp = await start_tcp(broker)
        broker.serving = True
        self.members[name] = m = Member(broker, group, tcp)
        return m

    async def start_all(self) -> None:
        for n in self.names:
            await self.start(n)

    async def stop(self, name: str) -> None:
        await self.members.pop(name).close()

    async def close(self) -> None:
        for name in list(self.members):
            await self.stop(name)

    def leaders(self) -> list[Member]:
        return [m for m in self.members.values() if m.group.role is Role.MASTER]

    async def leader(self, timeout: float = 5.0) -> Member:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            leaders = self.leaders()
            if len(leaders) == 1:
                return leaders[0]
            assert loop.time() < deadline, f"no single leader: {[m.name for m in leaders]}"
            await asyncio.sleep(0.01)
