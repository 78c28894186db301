"""Start and stop a broker's Raft group (`broker serve --group G --consensus raft`)."""

from __future__ import annotations

import logging

from broker_core.raft.stream_group import StreamGroup

log = logging.getLogger("floodgate.raft")


async def start_raft(broker) -> StreamGroup:
    """The broker's group: its log is the CommitLog's stream (raft.stream_group)."""
    cfg = broker.config
    peers = {m.name: (m.host, m.raft_port) for m in cfg.raft_members if m.name != cfg.name}
    addrs = {m.name: m.addr for m in cfg.raft_members}
    members = tuple(m.flag() for m in cfg.raft_members)
    group = StreamGroup(broker, cfg.group, peers, cfg.raft_port, client_addrs=addrs,
                        timeout_s=cfg.sync_timeout_s, fuse_moves=cfg.fuse_moves_leader,
                        members=members, join=cfg.raft_join).attach()
    await group.start(cfg.bind)
    log.info("group=%s consensus=raft raft_port=%d voters=%s%s", cfg.group, cfg.raft_port,
             ",".join(sorted(group.node.voters)), " (joining)" if cfg.raft_join else "")
    return group
