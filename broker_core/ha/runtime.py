"""Start and stop a broker's HA side: the node (role, replication) and its
membership in ZooKeeper. The runner calls `start_ha` when `--group` is given."""

from __future__ import annotations

import logging

from broker_core.errors import BrokerError
from broker_core.ha.membership import Membership
from broker_core.ha.node import HaNode, HaSettings
from broker_core.ha.records import parse_zk

log = logging.getLogger("floodgate.ha")


class HaRuntime:
    def __init__(self, node: HaNode, membership: Membership) -> None:
        self.node, self.membership = node, membership

    async def close(self) -> None:
        """Leave ZooKeeper first (a master's registration goes now, so the controller
        fails over at once), then stop replicating."""
        await self.membership.close()
        await self.node.close()


async def start_ha(broker) -> HaRuntime:
    cfg = broker.config
    if not cfg.zk or not cfg.ha_port:
        raise BrokerError("a broker in a group needs --zk HOST:PORT and --ha-port")
    if cfg.replication not in ("sync", "async"):
        raise BrokerError(f"--replication is sync or async, got {cfg.replication!r}")
    settings = HaSettings(cfg.group, cfg.ha_port, cfg.replication, cfg.sync_timeout_s)
    membership: Membership | None = None

    async def persist(in_sync):
        return await membership.persist_isr(in_sync) if membership is not None else False

    node = HaNode(broker, settings, persist_isr=persist).attach()
    await node.start()
    membership = Membership(node, parse_zk(cfg.zk), cfg.cluster, cfg.zk_session_s,
                            http_addr=cfg.http_addr)
    node.membership = membership
    try:
        await membership.start()
    except BaseException:
        await node.close()
        raise
    log.info("group=%s ha=%s zk=%s replication=%s session=%.1fs", cfg.group, node.ha_addr,
             cfg.zk, cfg.replication, cfg.zk_session_s)
    return HaRuntime(node, membership)
