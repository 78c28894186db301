"""A Raft group's members changed one at a time (the Raft thesis, chapter 4).

A configuration is an entry of the log (`Entry.members`), in force on a node from the
moment it is appended, committed or not: any majority of the old voters and any
majority of the new then share a member, so two leaders cannot be elected in one
term. A leader proposes a change only once the previous one is committed and an
entry of its own term is (the thesis's fix, 2015: a new leader must not stack a
change on one its forebear left uncommitted). A new member first catches up as a
learner (replicated to, no vote, thesis 4.2.1), from a snapshot of the store, so
that it never stalls the majority it joins; a leader removed by the change it
commits hands over (TimeoutNow to the follower furthest along) and steps down.
"""

from __future__ import annotations

from broker_core.raft.messages import Entry, TimeoutNow


class ConfigError(ValueError):
    """A change the group cannot take now (said in words)."""


def member_name(member: str) -> str:
    """A configuration lists members as NAME or NAME=HOST:PORT:RAFT_PORT."""
    return member.partition("=")[0]


def configure(node, now: float) -> None:
    """Take the configuration in force from the log: voters, and whom a leader replicates to."""
    node.config_index, members = node.storage.config()
    node.members = tuple(members or ())
    node.voters = frozenset(member_name(m) for m in node.members)
    node.learners -= node.voters
    peers = sorted((node.voters | node.learners) - {node.name})
    if peers == node.peers:
        return
    node.peers = peers
    if node.role.value == "leader":
        last = node.storage.last_index()
        for p in peers:
            if p not in node.next:
                node.next[p], node.match[p] = last + 1, 0
                node.heard[p], node.beat_due[p] = now, now
        for table in (node.next, node.match, node.heard, node.beat_due, node.snap):
            for p in [p for p in table if p not in peers]:
                del table[p]


def add_learner(node, name: str, now: float):
    """Replicate to `name` (no vote), starting with a snapshot of the store."""
    _check_leader(node)
    if name == node.name or name in node.voters:
        raise ConfigError(f"{name} is already a member of the group")
    node.learners.add(name)
    node.want_snapshot.add(name)
    configure(node, now)  # (a learner is a peer: replicated to, counted in no majority)
    return node._replicate(name, now)


def drop_learner(node, name: str, now: float) -> None:
    node.learners.discard(name)
    node.want_snapshot.discard(name)
    configure(node, now)


def propose_config(node, members: tuple[str, ...], now: float):
    """Append a configuration (the current voters plus or minus one): (its index, out)."""
    _check_leader(node)
    if node.config_index > node.commit:
        raise ConfigError(f"a membership change (entry {node.config_index}) is not "
                          "committed yet: one at a time")
    if node.storage.term_at(node.commit) != node.term:
        raise ConfigError("this leader has not committed an entry of its term yet")
    names = {member_name(m) for m in members}
    if len(names) != len(members):
        raise ConfigError(f"a member named twice: {sorted(members)}")
    if len(names ^ node.voters) != 1:
        raise ConfigError(f"one member at a time: {sorted(node.voters)} -> {sorted(names)}")
    if len(names) < 1:
        raise ConfigError("a group needs a member")
    index = node.storage.last_index() + 1
    node.storage.append([Entry(node.term, index, b"", tuple(members))])
    configure(node, now)
    node._advance_commit()
    return index, [m for p in node.peers for m in node._replicate(p, now)]


def caught_up(node, name: str) -> bool:
    """A learner holds everything committed (and took its snapshot): ready to vote."""
    return name not in node.snap and name not in node.want_snapshot \
        and node.match.get(name, 0) >= node.commit


def removed_leader_steps_down(node, now: float):
    """Called once the commit moves: a leader its own change removed hands over."""
    if node.name in node.voters or node.commit < node.config_index:
        return []
    last = node.storage.last_index()
    ready = sorted((p for p in node.voters if node.match.get(p) == last),
                   key=lambda p: -node.match[p])
    out = [(ready[0], TimeoutNow(node.term, node.name))] if ready else []
    node._become_follower(node.term, None, now)
    return out


def _check_leader(node) -> None:
    node.refuse_unless_leading()
