"""Start and stop a broker's Raft group (`broker serve --group G --consensus raft`)."""

from __future__ import annotations

import logging

from broker_core.raft.group import RaftGroup

log = logging.getLogger("floodgate.raft")


async def start_raft(broker):
    """The broker's group: a RaftGroup (the log as entries) or, with `--raft-log stream`,
    a StreamGroup (the log as the CommitLog's stream)."""
    cfg = broker.config
    peers = {m.name: (m.host, m.raft_port) for m in cfg.raft_members if m.name != cfg.name}
    addrs = {m.name: m.addr for m in cfg.raft_members}
    members = tuple(m.flag() for m in cfg.raft_members)
    if cfg.raft_log == "stream":
        from broker_core.raft.stream_group import StreamGroup

        group = StreamGroup(broker, cfg.group, peers, cfg.raft_port, client_addrs=addrs,
                            timeout_s=cfg.sync_timeout_s, fuse_moves=cfg.fuse_moves_leader,
                            members=members, join=cfg.raft_join).attach()
    else:
        group = RaftGroup(broker, cfg.group, peers, cfg.raft_port, client_addrs=addrs,
                          timeout_s=cfg.sync_timeout_s, fuse_moves=cfg.fuse_moves_leader,
                          members=members, join=cfg.raft_join).attach()
    await group.start(cfg.bind)
    log.info("group=%s consensus=raft log=%s raft_port=%d voters=%s%s", cfg.group,
             cfg.raft_log, cfg.raft_port, ",".join(sorted(group.node.voters)),
             " (joining)" if cfg.raft_join else "")
    return group
