"""A raft group's members changed on an operator's word (`POST /admin/members`,
`floodgate cluster add-replica` / `remove-replica`), and its links kept to whoever a
configuration names (raft.membership says what a change may be).

Adding: the new member (started with `--raft-join`) is a learner first, fed a
snapshot of the leader's store and then entries; once it holds everything committed,
a configuration naming it is proposed, and the call returns when that commits.
Removing: a configuration without it. One change at a time; a change the leader
loses its lead during is reported, not retried (the operator sees `status`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker_core.ha.node import Role
from broker_core.raft import membership
from broker_core.raft.members import parse_member
from broker_core.raft.node import NotLeader


def sync_members(group) -> None:
    """Links to every member a configuration names (their addresses in it)."""
    first = group.members_seen is None
    group.members_seen = group.node.members
    peers = dict(group.transport.peers)
    for flag in group.node.members:
        if "=" in flag:
            m = parse_member(flag)
            group.addrs[m.name] = m.addr
            if m.name != group.name:
                peers[m.name] = (m.host, m.raft_port)
    group.transport.set_peers(peers)
    if not first:
        group.event("members", f"voters {', '.join(sorted(group.node.voters))} "
                    f"(entry {group.node.config_index})")

async def change_members(group, add: str | None, remove: str | None,
                         timeout_s: float) -> dict:
    """Add a member (NAME=HOST:PORT:RAFT_PORT: a learner caught up from a snapshot
    of the store, then a configuration naming it) or remove one (NAME); returns
    once the configuration is committed. NotLeader, ConfigError (said in words),
    TimeoutError."""
    node, loop = group.node, group._loop
    if group.role is not Role.MASTER:
        raise NotLeader(group.name, node.leader)
    if group.changing:
        raise membership.ConfigError("another membership change is in flight")
    group.changing, started = True, loop.time()
    deadline, sent = started + timeout_s, node.counters["snapshot_bytes"]
    try:
        if add:
            new = parse_member(add)
            group.addrs[new.name] = new.addr
            group.transport.set_peers({**group.transport.peers,
                                      new.name: (new.host, new.raft_port)})
            group.drive(membership.add_learner(node, new.name, loop.time()))
            group.event("learner", f"{new.name} catching up from a snapshot of the store")
            try:
                await _until(group, lambda: membership.caught_up(node, new.name), deadline,
                                  f"{new.name} did not catch up within {timeout_s:g} s")
            except BaseException:
                membership.drop_learner(node, new.name, loop.time())
                raise
            members = (*node.members, add)
        else:
            members = tuple(m for m in node.members
                            if membership.member_name(m) != remove)
            if len(members) == len(node.members):
                raise membership.ConfigError(f"{remove} is not a member of {group.group} "
                                             f"(voters: {', '.join(sorted(node.voters))})")
        index, out = membership.propose_config(node, members, loop.time())
        term = node.term
        group.drive(out)
        await _until(group, lambda: node.commit >= index, deadline,
                          f"the configuration (entry {index}) did not commit within "
                          f"{timeout_s:g} s", lost_ok=True)
        if node.storage.term_at(index) != term:
            raise membership.ConfigError(f"the configuration (entry {index}) was cut by "
                                         "a new leader: not made")
    finally:
        group.changing = False
    return {"group": group.group, "members": list(node.members), "term": term,
            "index": index, "took_s": round(loop.time() - started, 3),
            "snapshot_bytes": node.counters["snapshot_bytes"] - sent}

async def _until(group, done: Callable[[], bool], deadline: float, late: str,
                 lost_ok: bool = False) -> None:
    """Poll `done` (an operator's change, once: not a path any message takes)."""
    while not done():
        if group.role is not Role.MASTER and not lost_ok:
            raise NotLeader(group.name, group.node.leader)
        if group._loop.time() > deadline:
            raise TimeoutError(late)
        await asyncio.sleep(0.02)
