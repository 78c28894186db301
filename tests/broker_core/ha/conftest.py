"""In-process replication pairs: real brokers (store, TCP, HA port) on one event loop."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.cluster.ports import free_port_range
from broker_core.ha.node import HaNode, HaSettings
from broker_core.ha.slave import MasterInfo
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.tcp import start_tcp


@dataclass
class Member:
    broker: Broker
    node: HaNode
    tcp: object

    @property
    def addr(self) -> str:
        return self.broker.config.addr

    def info(self, epoch: int) -> MasterInfo:
        return MasterInfo(self.broker.config.name, self.node.ha_addr, epoch)

    async def close(self) -> None:
        self.tcp.close()
        await self.node.close()
        self.broker.close()


async def member(data_dir, name: str, replication: str = "sync", group: str = "g",
                 sync_timeout_s: float = 1.0, segment_bytes: int = 64 * 1024,
                 persist_isr=None) -> Member:
    base = free_port_range(3)
    config = BrokerConfig(name=name, data_dir=data_dir / name, port=base, http_port=base + 1,
                          segment_bytes=segment_bytes,
                          store_extra={"max_message_bytes": 8 * 1024,
                                       "preallocate_next": False})
    broker = Broker(config)
    node = HaNode(broker, HaSettings(group, base + 2, replication, sync_timeout_s),
                  persist_isr=persist_isr).attach()
    await node.start()
    tcp = await start_tcp(broker)
    broker.serving = True
    return Member(broker, node, tcp)


def log_bytes(broker: Broker) -> bytes:
    cl = broker.store.commitlog
    end = cl.write_offset
    out = bytearray()
    for seg in cl.segments:
        out += seg.mm[: max(0, min(seg.size, end - seg.start_offset))]
    return bytes(out)


async def frozen_pair(data_dir, sync_timeout_s: float) -> tuple[Member, Member]:
    """Master m and slave s of group g, both in the in-sync set, with ZooKeeper away for
    m's changes to it: a slave that stops acking stays in the set (is waited for)."""
    async def frozen(_in_sync):
        return False

    m = await member(data_dir, "m", sync_timeout_s=sync_timeout_s, persist_isr=frozen)
    s = await member(data_dir, "s")
    await m.node.become_master(1, frozenset({"m", "s"}))
    await s.node.become_slave(m.info(1), m.addr)
    return m, s
