"""A leader a client's fuse finds slow hands its group to a follower, when the operator
allows it: over the wire (STEP_ASIDE, as a producer's fuse sends it), to a follower that
holds everything committed, at most once a minute; refused with its reason otherwise."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from broker_core.client.slow_leaders import SlowLeaders
from broker_core.raft.step_aside import StepAside
from tests.broker_core.raft.members import Group
from tests.broker_core.raft.test_group import produce, until

pytestmark = pytest.mark.timeout(60)


def node(commit=10, match=None, heard=None, voters=("a", "b", "c")):
    return SimpleNamespace(peers=["b", "c"], commit=commit, election_s=1.0, transfer_to=None,
                           match=match or {"b": 10, "c": 10}, voters=frozenset(voters),
                           heard=heard or {"b": 99.9, "c": 99.5})


def test_the_policy_moves_to_the_freshest_follower_holding_everything_once_a_minute():
    aside = StepAside(allowed=False)
    to, why = aside.choose(node(), 100.0, led_s=600)
    assert to is None and "not allowed" in why
    aside.allowed = True
    assert aside.choose(node(match={"b": 9, "c": 10}), 100.0, 600)[0] == "c"  # b lacks one
    to, why = aside.choose(node(), 100.0, led_s=30)  # its leader took over 30 s ago
    assert to is None and "at most once in 60 s" in why
    assert aside.choose(node(), 100.0, led_s=61)[0] == "b"  # b's answer is the latest
    assert aside.choose(node(heard={"b": 0.0, "c": 0.0}), 100.0, 600) == (
        None, "no follower holds everything committed and answers")
    # b a learner still catching up (cluster add-replica): no vote, so not a leader to be
    assert aside.choose(node(voters=("a", "c")), 100.0, 600)[0] == "c"
    assert (aside.moves, aside.refused) == (3, 3)
    busy = node()
    busy.transfer_to = "c"  # another client's word came first
    assert aside.choose(busy, 100.0, 600) == (None, "already handing the group to c")


def test_a_slow_leader_told_over_the_wire_hands_its_group_over_when_allowed(tmp_path):
    async def main():
        g = Group(tmp_path)
        await g.start_all()
        try:
            leader = await g.leader()
            await produce(leader.addr, 50)
            routes = SimpleNamespace(master=lambda group: leader.addr)
            loop = asyncio.get_running_loop()
            tell = SlowLeaders(routes).tell
            answer = await loop.run_in_executor(None, tell, "g", leader.addr)
            assert answer["moved"] is False and "--fuse-moves-leader" in answer["why"]
            assert leader.group.role.value == "MASTER"
            for m in g.members.values():  # the operator's word, given at start
                m.group.aside.allowed = True
            leader.group.since -= 120  # it has led for two minutes (no test waits one)
            follower = next(m for m in g.members.values() if m is not leader)
            answer = await loop.run_in_executor(None, tell, "g", follower.addr)
            assert answer == {"moved": False, "why": f"{follower.name} is not the leader; "
                                                    f"{leader.name} is"}
            answer = await loop.run_in_executor(None, tell, "g", leader.addr)
            assert answer["moved"] is True and answer["from"] == leader.name, answer
            await until(lambda: g.members[answer["to"]].group.role.value == "MASTER")
            new = g.members[answer["to"]]
            assert {r.status for r in await produce(new.addr, 50, first=50)} == {"SEND_OK"}
            assert any(e["kind"] == "step-aside" for e in leader.group.events)
            again = await loop.run_in_executor(None, tell, "g", new.addr)
            assert again["moved"] is False and "at most once" in again["why"]
        finally:
            await g.close()

    asyncio.run(main())
