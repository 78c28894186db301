"""The Raft core on a virtual network (tests/broker_core/raft/sim.py): seeded schedules
of loss, delay, duplication, reordering, crashes and cut links never break election
safety, log matching or a committed entry, and once healed the group elects a leader
and commits again; and the cases one by one: pre-vote, a vote kept across a crash, a
divergent tail cut, a leader cut off stepping down, leadership handed over."""

from __future__ import annotations

import heapq
import os
import random

import pytest

from broker_core.errors import StoreCorruptError
from broker_core.raft.log import MemoryStorage
from broker_core.raft.messages import Append, AppendReply, Entry, RequestVote
from broker_core.raft.node import NotLeader, RaftNode, Role
from broker_core.raft.pacing import LAZY_S
from tests.broker_core.raft.sim import Faults, Sim

# thousands in a long run (RAFT_SCHEDULES=5000); the suite runs a few hundred
SCHEDULES = int(os.environ.get("RAFT_SCHEDULES", "300"))
ROUGH = Faults(loss=0.1, duplicate=0.1, delay=(0.001, 0.08), crash_every_s=2.0,
               cut_every_s=3.0, wrong_gone=0.002)


def settle(sim: Sim, seconds: float = 5.0) -> RaftNode:
    sim.heal()
    sim.run(sim.now + seconds, healthy=True)
    leader = sim.leader()
    assert leader is not None, f"seed {sim.seed}: no leader after healing"
    return leader


@pytest.mark.parametrize(("size", "pre_vote", "share"), [(3, True, 1), (5, True, 3),
                                                          (3, False, 3)])
def test_seeded_schedules_keep_every_safety_property_and_recover(size, pre_vote, share):
    """Without pre-votes too: they screen candidates' logs before the vote does, so a
    broken vote (granted to a stale log) shows only with them off."""
    names = [f"n{i}" for i in range(size)]
    for seed in range(SCHEDULES // share):
        sim = Sim(names, seed, ROUGH, pre_vote=pre_vote)
        sim.run(15.0)
        leader = settle(sim)
        before = len(sim.proposed)
        sim.run(sim.now + 2.0, healthy=True)
        assert len(sim.proposed) > before, f"seed {seed}: nothing proposed once healed"
        sim.check_all()
        first = sim.proposed[before]  # the first proposal once healed: committed, on a quorum
        leader = sim.leader()
        held = [e.data for e in sim.storage[leader.name].entries(1, leader.commit)]
        assert first in held, f"seed {seed}: nothing committed once healed"
        assert sum(1 for s in sim.storage.values() if first in [e.data for e in s.log]) \
            >= leader.quorum


def test_a_healthy_group_elects_one_leader_and_commits_everywhere():
    sim = Sim(["a", "b", "c"], seed=1)
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    assert leader is not None and sum(n.role is Role.LEADER for n in sim.nodes.values()) == 1
    sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)  # the last ones reach everyone
    assert {n.commit for n in sim.nodes.values()} == {leader.storage.last_index()}
    assert all(s.log == leader.storage.log for s in sim.storage.values())


def test_a_node_cut_off_does_not_raise_the_groups_term_when_it_returns():
    sim = Sim(["a", "b", "c"], seed=2)
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    away = next(n for n in sim.names if n != leader.name)
    term = leader.term
    sim.isolated[away] = sim.now + 10.0  # it times out again and again meanwhile
    sim.run(sim.now + 10.0, healthy=True)
    assert sim.storage[away].term == term  # pre-votes only: no term spent
    sim.run(sim.now + 3.0, healthy=True)
    assert sim.leader().name == leader.name and sim.leader().term == term  # not deposed


def test_a_vote_is_saved_before_it_is_given_and_kept_across_a_crash():
    s = MemoryStorage()
    node = RaftNode("b", ["a", "c"], s, random.Random(1), now=0.0)
    out = node.step(RequestVote(1, "a", 0, 0), now=5.0)
    assert out[0][1].granted and (s.term, s.voted_for, s.saves) == (1, "a", 1)
    again = RaftNode("b", ["a", "c"], s, random.Random(2), now=6.0)  # restarted
    assert not again.step(RequestVote(1, "c", 0, 0), now=12.0)[0][1].granted
    candidate = RaftNode("a", ["b", "c"], MemoryStorage(), random.Random(3), now=0.0)
    out = candidate.tick(10.0)  # pre-vote first: its term untouched
    assert candidate.storage.term == 0 and {m.term for _to, m in out} == {1}


def test_a_leader_commits_an_older_terms_entry_only_behind_one_of_its_own():
    """Raft's figure 8: an entry of term 2 on a majority is not committed by a leader of
    term 4 until an entry of term 4 is on a majority too."""
    s = MemoryStorage()
    s.save_vote(4, "a")
    s.append([Entry(1, 1, b"x"), Entry(2, 2, b"y")])
    node = RaftNode("a", ["b", "c"], s, random.Random(1))
    node._become_leader(now=0.0)  # its no-op: entry 3, term 4
    node.step(AppendReply(4, "b", True, 2), now=0.1)
    assert node.commit == 0  # entry 2 is on two of three, and of term 2: not yet
    node.step(AppendReply(4, "b", True, 3), now=0.2)
    assert node.commit == 3


def test_a_followers_divergent_tail_is_cut_for_the_leaders_entries():
    s = MemoryStorage()
    s.save_vote(2, None)
    s.append([Entry(1, 1, b"x"), Entry(2, 2, b"stale"), Entry(2, 3, b"stale")])
    node = RaftNode("b", ["a", "c"], s, random.Random(1))
    out = node.step(Append(3, "a", 1, 1, (Entry(3, 2, b"new"),), 2), now=1.0)
    assert out[0][1].success and [e.data for e in s.log] == [b"x", b"new"]
    assert node.commit == 2
    refused = node.step(Append(3, "a", 4, 3, (), 2), now=1.1)  # past its end: a hint
    assert not refused[0][1].success and refused[0][1].match == 3


def test_a_leader_cut_off_from_its_group_stops_leading():
    sim = Sim(["a", "b", "c"], seed=3)
    sim.run(3.0, healthy=True)
    old = sim.leader()
    sim.isolated[old.name] = sim.now + 5.0
    sim.run(sim.now + 2 * sim.election_s + 0.1, healthy=True)
    assert old.role is Role.FOLLOWER  # it heard no majority for an election timeout
    with pytest.raises(NotLeader):
        old.propose([b"late"], sim.now)
    new = sim.leader()
    assert new is not None and new.name != old.name and new.term > old.term


def test_leadership_is_handed_over_once_the_target_holds_the_log():
    sim = Sim(["a", "b", "c"], seed=4)
    sim.run(3.0, healthy=True)
    old = sim.leader()
    target, term = next(n for n in sim.names if n != old.name), old.term
    sim.send(old.name, old.transfer(target, sim.now), healthy=True)
    with pytest.raises(NotLeader, match=f"{target} is"):
        old.propose([b"meanwhile"], sim.now)
    sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)
    assert sim.leader().name == target and sim.nodes[target].term == term + 1
    assert old.role is Role.FOLLOWER
    sim.check_all()


def test_a_transfer_to_a_member_that_never_takes_over_is_given_up():
    sim = Sim(["a", "b", "c"], seed=4)
    sim.run(3.0, healthy=True)
    old = sim.leader()
    target = next(n for n in sim.names if n != old.name)
    sim.isolated[target] = sim.now + 10.0  # it never hears the TimeoutNow
    sim.send(old.name, old.transfer(target, sim.now), healthy=True)
    with pytest.raises(NotLeader):
        old.propose([b"meanwhile"], sim.now)
    sim.run(sim.now + sim.election_s + 0.05, propose_every=1e9, healthy=True)
    assert sim.leader() is old and old.transfer_to is None
    old.propose([b"after"], sim.now)  # it takes proposals again


def test_followers_whose_leaders_port_refuses_elect_another_within_a_beat():
    sim = Sim(["a", "b", "c"], seed=5)  # election timeout 0.3-0.6 s, beat 0.05 s
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    term = leader.term
    sim.nodes[leader.name] = None  # SIGKILLed: its port refuses the others' links, and
    sim.queue = [m for m in sim.queue if m[2] != leader.name]  # what it sent has arrived
    heapq.heapify(sim.queue)
    for name in sim.names:
        if sim.nodes[name] is not None:
            sim.send(name, sim.nodes[name].leader_gone(leader.name, sim.now), healthy=True)
    sim.run(sim.now + 0.15, propose_every=1e9, healthy=True)  # three beats, half a timeout
    new = sim.leader()
    assert new is not None and new.name != leader.name and new.term == term + 1


def test_a_report_that_a_live_leader_is_gone_costs_no_term_and_no_leader():
    sim = Sim(["a", "b", "c"], seed=6)
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    term = leader.term
    told = next(n for n in sim.names if n != leader.name)
    assert sim.nodes[told].leader_gone("nobody", sim.now) == []  # not its leader: nothing
    assert sim.nodes[told].leader == leader.name
    sim.send(told, sim.nodes[told].leader_gone(leader.name, sim.now), healthy=True)
    sim.run(sim.now + 2.0, healthy=True)  # it stands; the others still hear the leader
    assert sim.leader().name == leader.name and sim.leader().term == term
    assert sim.nodes[told].leader == leader.name and sim.storage[told].term == term


def test_a_follower_that_lost_entries_it_acknowledged_is_caught_up_by_the_same_leader():
    """Flushed asynchronously, a follower's host crash can take entries it acknowledged
    (page cache gone). It comes back shorter than the leader last heard; the leader
    must send from where the follower now ends, not from where it ended before."""
    sim = Sim(["a", "b", "c"], seed=7)
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    follower = next(n for n in sim.names if n != leader.name)
    acked = leader.match[follower]
    assert acked > 20
    sim.nodes[follower] = None  # the host crashed: its memory gone, and its log's tail
    sim.storage[follower].truncate(acked // 2)
    sim._reboot(follower)
    sim.run(sim.now + 3.0, healthy=True)
    assert sim.leader() is leader  # the same leader all along: it must mend the gap
    sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)
    assert sim.storage[follower].log == leader.storage.log
    assert leader.match[follower] == leader.storage.last_index()


class RefusingStorage(MemoryStorage):
    """A store that refuses every entry while `refusing` (records that do not verify)."""

    refusing = False

    def append(self, entries: list[Entry]) -> None:
        if self.refusing and entries:
            raise StoreCorruptError("injected: a record that does not verify")
        super().append(entries)


def test_a_member_whose_store_refuses_every_entry_is_sent_one_entry_a_beat():
    """It refuses each entry it is sent: the leader sends it one entry a beat until it
    takes one (it was sent every entry it lacked, up to a batch of 256, every other
    beat: 4,920 entries in 80 beats here), hears it alive meanwhile, and sends the whole
    backlog once its store takes them again."""
    sim = Sim(["a", "b", "c"], seed=2,
              storage_factory=lambda _name, old: old or RefusingStorage())
    sim.run(3.0, healthy=True)
    leader = sim.leader()
    stuck = next(n for n in sim.names if n != leader.name)
    sim.storage[stuck].refusing = True
    sim.run(sim.now + 1.0, healthy=True)  # its gap grows past a beat's worth
    sent, start, commit = sim.entries_sent[stuck], sim.now, leader.commit
    sim.run(sim.now + 4.0, healthy=True)  # (a proposal every 0.05 s)
    beats = (sim.now - start) / sim.heartbeat_s
    assert sim.leader() is leader and leader.commit >= commit + 75  # the other two commit
    assert leader.storage.last_index() - sim.storage[stuck].last_index() > 80
    assert sim.entries_sent[stuck] - sent <= beats + 2  # (one a beat, and a refusal's retry)
    assert sim.now - leader.heard[stuck] < 2 * sim.heartbeat_s  # alive, and behind
    sim.storage[stuck].refusing = False
    sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)
    assert sim.storage[stuck].log == leader.storage.log


def _deliver(nodes: dict, out: list, now: float) -> None:
    """Every message and every answer to it, in order, at once (a perfect network)."""
    queue = list(out)
    while queue:
        to, msg = queue.pop(0)
        queue += nodes[to].step(msg, now)


def test_at_light_load_the_follower_a_majority_does_not_need_gets_entries_in_batches():
    """Of three, the leader sends each entry at once to the follower whose answer last
    moved its commit and holds it back from the other for LAZY_S (its batch); under
    load (an entry waiting for a majority) both get every entry at once; the prompt
    follower silent, the other's batch commits and it becomes the prompt one."""
    nodes = {n: RaftNode(n, [p for p in "abc" if p != n], MemoryStorage(),
                         random.Random(1), election_s=1.0) for n in "abc"}
    a, now = nodes["a"], 5.0
    _deliver(nodes, a.tick(now), now)  # its timeout passed first: pre-vote, vote, no-op
    assert a.role is Role.LEADER and a.commit == a.storage.last_index() and a.prompt == ["b"]

    def propose(data: bytes) -> tuple[list, list]:
        early: list = []
        _first, out = a.propose([data], now, lambda to, m: early.append((to, m)))
        return early, out

    for data in (b"x", b"y"):
        early, out = propose(data)
        assert [to for to, _m in early] == ["b"] and out == []  # c: held back
        _deliver(nodes, early, now)
        assert a.commit == a.storage.last_index()
    assert nodes["c"].storage.last_index() < a.commit
    batch = a.tick(now + LAZY_S)
    assert [(to, [e.data for e in m.entries]) for to, m in batch] == [("c", [b"x", b"y"])]
    _deliver(nodes, batch, now + LAZY_S)
    now += LAZY_S
    early, out = propose(b"z")  # b's answer not yet in: then load
    early2, out2 = propose(b"w")
    assert [to for to, _m in early2 + out2] == ["b", "c"]
    _deliver(nodes, early + out + early2 + out2, now)
    early, out = propose(b"v")  # b is paused from here: its Appends are lost
    assert [to for to, _m in early] == ["b"] and out == []
    now += LAZY_S
    _deliver(nodes, a.tick(now), now)  # c's batch answered: the commit moves on it
    assert a.commit == a.storage.last_index() and a.prompt == ["c"]
    early, _out = propose(b"u")
    assert [to for to, _m in early] == ["c"]
