"""A Raft member's elections (raft.stream_election steps the rest): the pre-vote of the thesis
(9.6: a node cut off asks first, and spends no term when nobody would vote for it),
the campaign, and the voter's side of both. A vote is saved before it is given and
refused within the lease of a live leader, unless the leader handed over (TimeoutNow).
"""

from __future__ import annotations

from broker_core.raft.messages import PreVote, PreVoteReply, RequestVote, VoteReply
from broker_core.raft.roles import Role


def log_ok(node, last_index: int, last_term: int) -> bool:
    """The candidate's log is at least as up to date as this node's (Raft, 5.4.1)."""
    s = node.storage
    mine = s.last_index()
    return (last_term, last_index) >= (s.term_at(mine), mine)


def pre_vote(node, now: float):
    node.role, node.leader, node.votes = Role.PRE_CANDIDATE, None, {node.name}
    node._reset_election(now)
    if len(node.votes) >= node.quorum:
        return campaign(node, now, transfer=False)
    last = node.storage.last_index()
    ask = PreVote(node.term + 1, node.name, last, node.storage.term_at(last))
    return [(p, ask) for p in node.peers if p in node.voters]


def on_pre_vote(node, msg: PreVote, now: float):
    granted = (msg.term > node.term and not node._in_lease(now)
               and log_ok(node, msg.last_index, msg.last_term))
    return [(msg.candidate, PreVoteReply(msg.term if granted else max(node.term, msg.term - 1),
                                         node.name, granted))]


def on_pre_vote_reply(node, msg: PreVoteReply, now: float):
    if not msg.granted and msg.term > node.term:
        node._become_follower(msg.term, None, now)
    elif (node.role is Role.PRE_CANDIDATE and msg.granted and msg.term == node.term + 1
          and msg.voter in node.voters):
        node.votes.add(msg.voter)
        if len(node.votes) >= node.quorum:
            return campaign(node, now, transfer=False)
    return []


def campaign(node, now: float, transfer: bool):
    node.storage.save_vote(node.term + 1, node.name)  # durable before it is asked for
    node.role, node.leader, node.votes = Role.CANDIDATE, None, {node.name}
    node._reset_election(now)
    if len(node.votes) >= node.quorum:
        return node._become_leader(now)
    last = node.storage.last_index()
    ask = RequestVote(node.term, node.name, last, node.storage.term_at(last), transfer)
    return [(p, ask) for p in node.peers if p in node.voters]


def on_vote(node, msg: RequestVote, now: float):
    """A newer term and the vote in it are saved in one write, before the answer."""
    if msg.term > node.term and node._in_lease(now) and not msg.transfer:
        return [(msg.candidate, VoteReply(node.term, node.name, False))]
    s = node.storage
    newer = msg.term > node.term
    granted = (msg.term >= node.term and (newer or s.voted_for in (None, msg.candidate))
               and log_ok(node, msg.last_index, msg.last_term))
    if newer:
        s.save_vote(msg.term, msg.candidate if granted else None)
        node._become_follower(msg.term, None, now)
    elif granted and s.voted_for is None:
        s.save_vote(node.term, msg.candidate)
    if granted:
        node._reset_election(now)
    return [(msg.candidate, VoteReply(node.term, node.name, granted))]


def on_vote_reply(node, msg: VoteReply, now: float):
    if (node.role is Role.CANDIDATE and msg.term == node.term and msg.granted
            and msg.voter in node.voters):
        node.votes.add(msg.voter)
        if len(node.votes) >= node.quorum:
            return node._become_leader(now)
    return []
