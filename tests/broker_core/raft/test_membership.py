"""Membership changes on the Raft core's virtual network (sim.py): a group of three
adds a fourth member (a learner first, caught up from a snapshot), removes an old
one, and the same under loss, duplication, reordering, crashes and cut links, with
logs compacted so that lagging members need snapshots too. Election safety, log
matching and every committed entry hold throughout; once healed, the new
configuration commits and the removed member no longer votes."""

from __future__ import annotations

import os

import pytest

from broker_core.raft.log import MemoryStorage
from broker_core.raft.membership import ConfigError, caught_up
from broker_core.raft.messages import Entry, Snapshot, SnapshotReply
from broker_core.raft.node import NotLeader, RaftNode, Role
from tests.broker_core.raft.sim import Faults, Sim

SCHEDULES = int(os.environ.get("RAFT_SCHEDULES", "300")) // 3
ROUGH = Faults(loss=0.1, duplicate=0.1, delay=(0.001, 0.08), crash_every_s=2.0,
               cut_every_s=3.0)


class Changes:
    """Drives a plan of changes from the sim's proposal rounds, as the broker does: a
    learner first, the configuration once it holds everything committed."""

    def __init__(self, plan: list[tuple[str, str]], compact_keep: int | None = None) -> None:
        self.plan, self.done, self.keep = list(plan), [], compact_keep

    def __call__(self, sim: Sim) -> None:
        if self.keep is not None:  # forget old entries: lagging members need snapshots
            for name, node in sim.nodes.items():
                if node is not None:
                    sim.storage[name].compact(node.commit - self.keep)
        leader = sim.leader()
        if leader is None or not self.plan:
            return
        what, name = self.plan[0]
        members = set(leader.voters)
        try:
            if what == "add" and name not in members:
                if name not in leader.learners:
                    sim.send(leader.name, leader_add(leader, name, sim.now))
                elif caught_up(leader, name):
                    self._propose(sim, leader, (*sorted(members), name))
            elif what == "remove" and name in members:
                self._propose(sim, leader, tuple(sorted(members - {name})))
        except (ConfigError, NotLeader):
            return  # the previous change is not committed yet, or it lost its lead
        if (name in leader.voters) == (what == "add") and leader.commit >= leader.config_index:
            self.done.append(self.plan.pop(0))

    @staticmethod
    def _propose(sim: Sim, leader, members) -> None:
        from broker_core.raft.membership import propose_config

        _index, out = propose_config(leader, members, sim.now)
        sim.send(leader.name, out)


def leader_add(leader, name: str, now: float):
    from broker_core.raft.membership import add_learner

    return add_learner(leader, name, now)


def test_a_member_is_added_from_a_snapshot_and_an_old_one_removed():
    changes = Changes([("add", "d"), ("remove", "a")], compact_keep=5)
    sim = Sim(["a", "b", "c", "d"], seed=7, joiners=("d",))
    sim.run(3.0, healthy=True)
    assert sim.leader() is not None and sim.nodes["d"].leader is None  # nobody feeds it
    assert sim.nodes["d"].role is Role.FOLLOWER and "d" not in sim.nodes["b"].voters
    for name, node in sim.nodes.items():
        sim.storage[name].compact(node.commit - 5)
    sim.on_round = changes
    sim.run(sim.now + 6.0, healthy=True)
    assert changes.done == [("add", "d"), ("remove", "a")]
    leader = sim.leader()
    assert leader.voters == {"b", "c", "d"}
    assert sum(n.counters["snapshots_sent"] for n in sim.nodes.values()) >= 1
    d = sim.storage["d"]
    assert d.first > 1, "d caught up from a snapshot, not entry by entry"
    sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)
    sim.check_all()
    for name in ("b", "c", "d"):  # the new group holds one log
        assert sim.nodes[name].commit == leader.commit
    # removed (it may never hear so: nobody feeds it): its pre-votes move nobody
    term = leader.term
    sim.run(sim.now + 3.0, healthy=True)
    assert sim.leader() is leader and leader.term == term


def test_the_leader_removing_itself_hands_over_and_steps_down():
    sim = Sim(["a", "b", "c"], seed=3)
    sim.run(2.0, healthy=True)
    old = sim.leader()
    changes = Changes([("remove", old.name)])
    sim.on_round = changes
    sim.run(sim.now + 3.0, healthy=True)
    assert changes.done == [("remove", old.name)]
    new = sim.leader()
    assert new is not None and new.name != old.name
    assert old.role is Role.FOLLOWER and old.name not in new.voters
    assert len(new.voters) == 2 and new.quorum == 2


def test_changes_are_refused_two_at_a_time_and_before_the_leaders_own_entry_commits():
    sim = Sim(["a", "b", "c", "d", "e"], seed=5, joiners=("d", "e"))
    sim.run(2.0, healthy=True)
    leader = sim.leader()
    from broker_core.raft.membership import propose_config

    with pytest.raises(ConfigError, match="one member at a time"):
        propose_config(leader, ("a", "b", "c", "d", "e"), sim.now)
    _index, out = propose_config(leader, tuple(sorted(leader.voters - {"c"})), sim.now)
    with pytest.raises(ConfigError, match="not committed yet"):
        propose_config(leader, tuple(sorted(leader.voters | {"d"})), sim.now)
    follower = next(n for n in sim.nodes.values() if n.role is Role.FOLLOWER
                    and n.name in leader.voters)
    with pytest.raises(NotLeader):
        propose_config(follower, ("a", "b"), sim.now)


def test_a_member_behind_the_leaders_first_entry_is_caught_up_by_a_snapshot():
    sim = Sim(["a", "b", "c"], seed=11)
    sim.run(2.0, healthy=True)
    lagging = next(n for n in sim.names if sim.nodes[n].role is not Role.LEADER)
    sim.isolated[lagging] = sim.now + 3.0
    sim.run(sim.now + 3.0, healthy=False)  # (faults: none but the cut)
    leader = sim.leader()
    for name, node in sim.nodes.items():
        if name != lagging:
            sim.storage[name].compact(node.commit)
    assert sim.storage[leader.name].first_index() > sim.storage[lagging].last_index() + 1
    sim.run(sim.now + 2.0, healthy=True)
    assert leader.counters["snapshots_sent"] >= 1
    assert sim.nodes[lagging].commit >= leader.commit - 2
    sim.check_all()


@pytest.mark.parametrize("keep", [None, 3])
def test_seeded_schedules_with_membership_changes_keep_every_safety_property(keep):
    for seed in range(SCHEDULES):
        changes = Changes([("add", "d"), ("remove", "a"), ("add", "e"), ("remove", "b")],
                          compact_keep=keep)
        sim = Sim(["a", "b", "c", "d", "e"], seed, ROUGH, joiners=("d", "e"),
                  on_round=changes)
        sim.run(12.0)
        sim.heal()
        sim.run(sim.now + 12.0, healthy=True)
        sim.check_all()
        assert not changes.plan, f"seed {seed}: changes left undone: {changes.plan}"
        leader = sim.leader()
        assert leader is not None and leader.voters == {"c", "d", "e"}, f"seed {seed}"


def test_a_memory_snapshot_round_trips_members_and_refuses_a_wrong_last_term():
    s = MemoryStorage()
    s.set_bootstrap(("a", "b", "c"))
    s.append([Entry(1, 1, b"x"), Entry(1, 2, b"", ("a", "b", "c", "d")), Entry(2, 3, b"y")])
    start, end = s.snapshot_size(3)
    blob = s.snapshot_read(3, start, end)
    other = MemoryStorage()
    assert other.install(3, 0, 0, blob[:5], end) == 5
    assert other.install(3, 0, 0, blob[:5], end) == 5  # a chunk sent twice: taken once
    assert other.install(3, 0, 5, blob[5:], end) == end
    other.install_done(3, 2, ("a", "b", "c", "d"), end)
    assert other.config() == (2, ("a", "b", "c", "d")) and other.first_index() == 4
    third = MemoryStorage()
    third.install(3, 0, 0, blob, end)
    with pytest.raises(ValueError, match="term"):
        third.install_done(3, 9, (), end)


def test_a_snapshot_come_late_leaves_the_entries_past_it_in_the_log():
    """A snapshot chunk delayed (or sent again) reaching a member that has meanwhile
    taken entries past it by Appends and acknowledged them, its commit behind (it
    restarted): installed, it cut acknowledged entries, and a leader elected without
    them lost what a majority had committed (a sim schedule found it). The Raft
    paper's figure 13: a log holding the snapshot's last entry keeps what follows."""
    entries = [Entry(1, 1, b"", ("a", "b", "c")), *(Entry(1, i, b"v%d" % i) for i in (2, 3))]
    leader = MemoryStorage()
    leader.append(entries)
    start, end = leader.snapshot_size(3)
    chunk = Snapshot(1, "a", 3, 1, ("a", "b", "c"), start, 0, end,
                     leader.snapshot_read(3, start, end))
    held = MemoryStorage()
    held.append([*entries, Entry(1, 4, b"v4"), Entry(1, 5, b"v5")])
    follower = RaftNode("b", ["a", "c"], held, election_s=1.0)  # (restarted: commit 0)
    out = follower.step(chunk, 0.0)
    assert [e.data for e in held.log[3:]] == [b"v4", b"v5"] and held.last_index() == 5
    assert out == [("a", SnapshotReply(1, "b", 3, end))] and follower.commit == 3
