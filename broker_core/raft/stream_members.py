"""A stream group's members (raft.stream_group), changed one at a time on an operator's
word (`POST /admin/members`, `floodgate cluster add-replica` / `remove-replica`), by
the Raft thesis's rules (chapter 4) on the stream log.

A configuration is a record of the log (topic %RAFT_MEMBERS%). Its members are kept by
the record's offset in members.json (raft.config_file, offsets for indexes) before a
byte of it leaves the leader, and go to each follower in a CONFIG frame ahead of the
record's bytes: in force on a member from the moment it has it (a follower's, its record
follows in the same push), committed or not, and gone with the record when a new
leader's log cuts it (one at a time, any majority of the old members and of the new
share one: either may elect). Adding: the new member
(`--raft-join`) is a learner first, fed the stream from the leader's first offset; once
it holds everything committed, a configuration naming it is written, and the call
returns when that commits. Removing: a configuration without it; a leader that removes
itself hands the group to the follower furthest along once the change commits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from broker_core.ha.node import Role
from broker_core.raft.config_file import ConfigFile
from broker_core.raft.members import ConfigError, member_name, parse_member
from broker_core.raft.stream_election import NotLeader

MEMBERS_TOPIC = "%RAFT_MEMBERS%"


def open_configs(path: Path, end: int, bootstrap: tuple[str, ...], join: bool) -> ConfigFile:
    """The configurations of a log ending at `end`; the bootstrap members are saved at
    the first start (a restarted member never takes a list that changed since)."""
    configs = ConfigFile(path, end)
    if configs.bootstrap is None and not configs.entries and not join and bootstrap:
        configs.bootstrap = tuple(bootstrap)
        configs.save()
    return configs


def in_force(group) -> tuple[int, tuple[str, ...]]:
    """(the offset of the configuration in force, its members): the last one held."""
    offset, members = group.configs.config()
    return offset, tuple(members or ())


def apply(group) -> None:
    """Vote, feed and link as the configuration in force says."""
    offset, members = in_force(group)
    voters = {member_name(m) for m in members}
    peers = dict(group.transport.peers)
    for flag in members:
        if "=" in flag:
            m = parse_member(flag)
            group.addrs[m.name] = m.addr
            if m.name != group.name:
                peers[m.name] = (m.host, m.raft_port)
                group.stream_addrs[m.name] = f"{m.host}:{m.raft_port}"
    if members:  # (a member joining knows none yet: it keeps the links it was given)
        keep = voters | group.learners
        group.transport.set_peers({n: a for n, a in peers.items() if n in keep})
    group.election.configure(voters, group.learners, group._loop.time())
    if offset != group.config_offset:
        group.config_offset = offset
        group.event("members", f"voters {', '.join(sorted(voters))} (record at {offset})")


def between(group, start: int, end: int) -> list[tuple[int, tuple[str, ...]]]:
    """The configurations whose records lie in [start, end), sent ahead of those bytes;
    from the leader's first byte (a member begun there: retention removed the older
    bytes), the one in force there first."""
    entries = group.configs.entries
    if not entries:
        return []
    out = []
    if 0 < start == group.broker.store.commitlog.min_offset:
        before = [o for o in entries if o < start]
        out = [(max(before), entries[max(before)])] if before else []
    if max(entries) < start:  # (every push asks: most find none)
        return out
    return out + sorted((o, m) for o, m in entries.items() if start <= o < end)


def received(group, offset: int, members: tuple[str, ...]) -> None:
    """A follower's: the leader's configuration whose record starts at `offset`."""
    group.configs.cut(offset)  # (a longer tail of an older term held here is going)
    group.configs.add(offset, members)
    apply(group)


def cut(group, offset: int) -> None:
    group.configs.cut(offset)
    apply(group)


async def change_members(group, add: str | None, remove: str | None,
                         timeout_s: float) -> dict:
    """Add a member (NAME=HOST:PORT:RAFT_PORT) or remove one (NAME); returns once the
    configuration naming the group's new members is committed. NotLeader, ConfigError
    (said in words), TimeoutError."""
    loop, master = group._loop, group.master
    if group.role is not Role.MASTER:
        raise NotLeader(group.name, group.election.leader)
    if group.changing:
        raise ConfigError("another membership change is in flight")
    group.changing, started = True, loop.time()
    deadline = started + timeout_s
    try:
        await _until(group, lambda: master.committed > master.term_start, deadline,
                     "no record of this leader's term committed yet")
        offset, members = in_force(group)
        if offset >= master.committed:  # (the thesis's fix: one change at a time)
            raise ConfigError("the group's last change of members is not committed yet")
        new = None
        if add:
            new = parse_member(add)
            if new.name in group.election.voters:
                raise ConfigError(f"{new.name} is already a member of {group.group}")
            group.learners.add(new.name)
            group.addrs[new.name] = new.addr
            group.stream_addrs[new.name] = f"{new.host}:{new.raft_port}"
            group.transport.set_peers({**group.transport.peers,
                                      new.name: (new.host, new.raft_port)})
            apply(group)
            group.event("learner", f"{new.name} catching up from the leader's stream")
            try:
                await _until(group, lambda: master.acked.get(new.name, -1) >= master.committed
                             or new.name in master.behind, deadline,
                             f"{new.name} did not catch up within {timeout_s:g} s")
                if new.name in master.behind:
                    raise ConfigError(master.behind.pop(new.name))
            except BaseException:
                group.learners.discard(new.name)
                apply(group)
                raise
            members = (*members, add)
        else:
            kept = tuple(m for m in members if member_name(m) != remove)
            if len(kept) == len(members):
                raise ConfigError(f"{remove} is not a member of {group.group} (voters: "
                                  f"{', '.join(sorted(group.election.voters))})")
            members = kept
        term = group.election.term
        result = group.broker.store.put(MEMBERS_TOPIC, 0, json.dumps(list(members)).encode(),
                                        wait=False)
        if not result.ok:
            raise ConfigError(f"the configuration was not written: {result.reason}")
        group.configs.add(result.physical_offset, members)  # before a byte of it leaves
        if new is not None:
            group.learners.discard(new.name)
        apply(group)
        master.appended(result.end_offset)
        await _until(group, lambda: master.committed >= result.end_offset, deadline,
                     f"the configuration (record at {result.physical_offset}) did not "
                     f"commit within {timeout_s:g} s", lost_ok=True)
        if group.configs.entries.get(result.physical_offset) != tuple(members):
            raise ConfigError(f"the configuration (record at {result.physical_offset}) was "
                              "cut by a new leader: not made")
        if group.name not in group.election.voters:
            _hand_over(group)
    finally:
        group.changing = False
    return {"group": group.group, "members": list(members), "term": term,
            "index": result.physical_offset, "took_s": round(loop.time() - started, 3),
            # (the CLI's "store copied": a stream group's new member took the log itself)
            "snapshot_bytes": max(0, master.acked.get(new.name, 0) - master.store.commitlog
                                  .min_offset) if new is not None else 0}


def _hand_over(group) -> None:
    """This leader removed itself: the follower furthest along takes the group."""
    e, acked = group.election, group.master.acked
    to = max(sorted(e.voters), key=lambda p: acked.get(p, -1))
    group.event("removed", f"no longer a member: handing the group to {to}")
    group.transfer(to)


async def _until(group, done: Callable[[], bool], deadline: float, late: str,
                 lost_ok: bool = False) -> None:
    """Poll `done` (an operator's change, once: not a path any message takes)."""
    while not done():
        if group.role is not Role.MASTER and not lost_ok:
            raise NotLeader(group.name, group.election.leader)
        if group._loop.time() > deadline:
            raise TimeoutError(late)
        await asyncio.sleep(0.02)
