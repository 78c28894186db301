"""Which followers get a leader's entries at once, and which in batches.

A leader's majority needs quorum - 1 followers: while its load is light (no entry
waits for a majority but the newest) the others ("lazy") get its entries in batches,
once LAZY_BYTES are held back or LAZY_S after the first (Nagle's rule). At one send in
flight a group of three spent twice a master's CPU on two cores, the second follower's
Append a send competing with the path a send waits on. Under load every follower gets
every entry at once: the first answer of two is the quicker. The followers whose
answers last moved the commit stay prompt: one paused or slow hands its place to the
next that answers, within LAZY_S.

Only when entries are sent changes here, never what is sent or what counts: an
acknowledged entry is on a majority as before.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_core.raft.messages import Append, Entry, Message

LAZY_S = 0.005
LAZY_BYTES = 4096


def lazy(node, peer: str) -> bool:
    """`peer` is a voter the majority does not wait on."""
    prompt = node.prompt
    return len(prompt) >= node.quorum - 1 and peer not in prompt and peer in node.voters


def held_back(node, peer: str, now: float, size: int = 0) -> bool:
    """A lazy peer's entries (`size` more bytes) wait for its batch: its beat moved up
    to LAZY_S from now."""
    if not lazy(node, peer) or node.storage.last_index() - node.commit > 1:
        return False
    held = node.held[peer] = node.held.get(peer, 0) + size
    if held >= LAZY_BYTES:
        return False
    if node.beat_due[peer] > now + LAZY_S:
        node.beat_due[peer] = now + LAZY_S
    return True


def send_in_step(node, entries: list[Entry], now: float,
                 send: Callable[[str, Message], None]) -> list[str]:
    """Append `entries` to the prompt followers whose next entry they are, before the
    leader writes them (RaftNode.propose); returns whom."""
    first, sent = entries[0].index, []
    msg = None
    for p in node.peers:
        if node.next[p] != first or p in node.probing or p in node.snap or \
                p in node.want_snapshot or lazy(node, p):
            continue
        if msg is None:
            msg = Append(node.term, node.name, first - 1, node.storage.term_at(first - 1),
                         tuple(entries), node.commit)
        send(p, msg)
        node.next[p], node.beat_due[p] = first + len(entries), now + node.heartbeat_s
        node.held[p] = 0
        sent.append(p)
    return sent


def prompt(node, peer: str) -> None:
    """`peer`'s answer moved the commit: it is among those the leader feeds at once."""
    order = node.prompt
    if order and order[0] == peer:
        return
    if peer in order:
        order.remove(peer)
    order.insert(0, peer)
    del order[max(node.quorum - 1, 0):]
