"""Elections for a group whose log is a byte stream (raft.stream_election), on a virtual
network with a model of the master's replication stream (stream_sim.py): seeded
schedules of loss, delay, duplication, crashes, cut links and leadership transfers keep
every safety property and recover once healed; and the cases one by one."""

from __future__ import annotations

import os

import pytest

from broker_core.raft import votes
from broker_core.raft.messages import Append, AppendReply, RequestVote, TimeoutNow, VoteReply
from broker_core.raft.roles import Role
from broker_core.raft.stream_election import NotLeader, StreamElection
from tests.broker_core.raft.stream_sim import Disk, Faults, StreamSim

SCHEDULES = int(os.environ.get("RAFT_SCHEDULES", "300"))
ROUGH = Faults(loss=0.1, duplicate=0.1, delay=(0.001, 0.08), crash_every_s=1.0,
               cut_every_s=3.0, down_s=(0.1, 1.5))


def run_schedule(names, seed, **kw) -> StreamSim:
    sim = StreamSim(names, seed, ROUGH, **kw)
    sim.run(12.0)
    sim.heal()
    sim.run(sim.now + 4.0, healthy=True)
    assert sim.leader() is not None, f"seed {seed}: no leader once healed"
    committed = len(sim.committed)
    sim.run(sim.now + 1.0, healthy=True)
    assert len(sim.committed) > committed, f"seed {seed}: nothing committed once healed"
    sim.check_log_matching()
    return sim


@pytest.mark.parametrize(("size", "share", "transfers"), [(3, 1, 0.0), (3, 2, 0.002),
                                                           (5, 3, 0.002)])
def test_seeded_schedules_keep_every_safety_property_and_recover(size, share, transfers):
    names = [f"n{i}" for i in range(size)]
    crashes = 0
    for seed in range(SCHEDULES // share):
        sim = run_schedule(names, seed, chunk=1 + seed % 3, transfer_every_s=transfers)
        crashes += sim.crashes
    assert crashes > SCHEDULES // share  # (the schedules did crash nodes)


def test_the_checker_sees_a_vote_given_to_a_stale_log(monkeypatch):
    """The schedules above can fail: with votes that compare only where logs end, not
    the term of their last byte, some of the same schedules break leader completeness."""
    monkeypatch.setattr(votes, "log_ok", lambda node, end, _term: end >= node.storage.last_index())
    broken = 0
    for seed in range(60):
        try:
            run_schedule(["a", "b", "c"], seed, chunk=1)
        except AssertionError:
            broken += 1
    assert broken > 0


def election(name="a", voters=("a", "b", "c"), units=(), history=(), term=0):
    disk = Disk(list(units))
    disk.history.entries = list(history)
    disk.term = term
    return StreamElection(name, list(voters), disk, disk, election_s=1.0, heartbeat_s=0.1), disk


def test_a_vote_goes_to_a_log_whose_last_byte_is_of_a_newer_term_or_as_new_and_longer():
    for last_index, last_term, granted in [(1, 3, True), (2, 2, True), (5, 1, False),
                                           (1, 2, False)]:
        e, _disk = election(units=[(1, 1), (2, 2)], history=[(1, 0), (2, 1)], term=2)
        out = e.step(RequestVote(3, "b", last_index, last_term), now=5.0)
        assert out == [("b", VoteReply(3, "a", granted))], (last_index, last_term)


def test_the_term_of_the_last_byte_skips_a_term_that_wrote_nothing():
    _e, disk = election(units=[(1, 1), (1, 2)], history=[(1, 0), (4, 2)])
    assert disk.last_term() == 1  # term 4's leader began at 2 and wrote no byte


def test_a_leader_that_hears_no_majority_for_an_election_timeout_steps_down():
    e = _leader()
    e.tick(e.now + 0.5)
    assert e.role is Role.LEADER
    e.step(AppendReply(e.term, "b", True, 0), e.now + 0.9)
    e.tick(e.now + 1.5)
    assert e.role is Role.LEADER  # b answered 0.6 s ago: with itself, a majority
    e.tick(e.now + 2.5)
    assert e.role is Role.FOLLOWER


def _leader() -> StreamElection:
    e, _disk = election()
    e.pre_vote = False
    e.tick(10.0)
    assert e.role is Role.CANDIDATE
    e.step(VoteReply(e.term, "b", True), 10.0)
    e.now = 10.0
    return e


def test_a_leader_beats_with_its_commit_and_a_follower_answers_where_it_ends():
    e = _leader()
    e.commit = 7
    out = e.tick(e.now + 0.1)
    assert sorted(to for to, _m in out) == ["b", "c"]
    assert all(m == Append(e.term, "a", 7) for _to, m in out)
    f, _disk = election("b", units=[(1, 1)] * 4, history=[(1, 0)])
    assert f.step(Append(1, "a", 3), 0.0) == [("a", AppendReply(1, "b", True, 4))]
    assert f.leader == "a" and f.term == 1


def test_a_transfer_waits_until_its_target_holds_the_whole_log_and_refuses_sends_meanwhile():
    e = _leader()
    e.log.units[:] = [(e.term, 1), (e.term, 2)]
    assert e.transfer("b", e.now) == []
    with pytest.raises(NotLeader, match="b is"):
        e.refuse_unless_leading()
    assert e.step(AppendReply(e.term, "b", True, 1), e.now) == []
    assert e.step(AppendReply(e.term, "b", True, 2), e.now) == [("b", TimeoutNow(e.term, "a"))]


def test_a_deposed_leaders_beat_is_answered_with_the_newer_term():
    f, _disk = election("b", term=5)
    assert f.step(Append(4, "a", 0), 0.0) == [("a", AppendReply(5, "b", False, 0))]
