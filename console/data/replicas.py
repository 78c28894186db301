"""A replicated group's brokers answer with copies: its slaves hold their master's messages,
offsets and so consumer lag. What is summed or shown per group counts each copy once; a
group, not a broker, is what serves sends (availability); and a member the console cannot
reach may be alive to its group (a partition, not a crash)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from console.data.kept_http import REFUSED
from console.data.views import BrokerView


def slave_copies(answered: Iterable[tuple[str, str, bool]]) -> set[str]:
    """Of the brokers that answered, as (name, group, is a slave): the slaves whose figures
    are a copy of another answering broker's of their group. A slave whose group has no
    other answer is the one to read (consumers read and commit there meanwhile)."""
    members = list(answered)
    led = {group for _name, group, slave in members if not slave}
    return {name for name, group, slave in members if slave and group in led}


def copied(brokers: Sequence[BrokerView]) -> set[str]:
    """The slaves whose figures copy an answering master's (`slave_copies`)."""
    return slave_copies((b.name, b.group, b.role == "SLAVE") for b in brokers
                        if b.group and b.answering)


def without_copied_lag(brokers: Sequence[BrokerView]) -> tuple[BrokerView, ...]:
    """A slave's consumer lag is a copy: its master's offsets, replicated once a second,
    against its own end, so always a little higher than the master's."""
    copies = copied(brokers)
    return tuple(replace(b, consumer_lag=None) if b.name in copies else b for b in brokers)


def in_group(b: BrokerView, groups: Mapping[str, str]) -> BrokerView:
    """A broker that never answered has told no group: the cluster file's (`groups`:
    broker name -> group), so a dead master is shown, and counted, in its group."""
    return replace(b, group=groups[b.name]) if not b.group and b.name in groups else b


def serving(brokers: Sequence[BrokerView]) -> tuple[int, int]:
    """(groups that can take sends, groups) in one poll: a replicated group while one of
    its members answers as its master, a single-copy broker while it answers. Not brokers:
    a group failed over to its slave serves in full while its old master lies dead."""
    units: dict[str, bool] = {}
    for b in brokers:
        if b.group:
            units[b.group] = units.get(b.group, False) or (b.answering and b.role == "MASTER")
        else:
            units[b.name] = b.answering
    return sum(units.values()), len(units)


def _peers_see(b: BrokerView, brokers: Sequence[BrokerView]) -> str:
    """For a broker the console cannot reach: which members of its group still
    replicate with it ("" when none does: down, or cut off from them too)."""
    seen = []
    for peer in brokers:
        ha = peer.stats.ha if peer.stats is not None else None
        if peer is b or ha is None or peer.group != b.group or peer.state == "DOWN":
            continue
        if ha.role == "MASTER" and any(sl.name == b.name for sl in ha.slaves):
            seen.append(f"{peer.name} streams to it")
        following = ha.doc.get("following") or {}
        if ha.role == "SLAVE" and following.get("master") == b.name and \
                following.get("connected"):
            seen.append(f"{peer.name} follows it")
    return ", ".join(seen)


def with_peers(brokers: Sequence[BrokerView]) -> tuple[BrokerView, ...]:
    """DOWN brokers its group's members still replicate with are unreachable from here,
    not dead (a partition between the console and them): say so. Not when its host
    refused the connection: the host answered, and nothing listens (its peers' figures,
    up to a second old, can still show the link a kill has just cut)."""
    out = []
    for b in brokers:
        seen = (_peers_see(b, brokers) if b.state == "DOWN" and b.group
                and b.reason != REFUSED else "")
        out.append(replace(b, reason=f"unreachable from here ({b.reason}); alive to its "
                                     f"peers: {seen}") if seen else b)
    return tuple(out)
