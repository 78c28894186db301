"""The Raft core on real stores (tests/broker_core/raft/sim.py with each node's
CommitLog storage): seeded schedules of loss, delay, duplication, reordering, cut links
and crashes (a node's store closed without its published mark and opened again)
keep every safety property, and at the end every live node's readers see the same
committed messages, in the order they were committed, and nothing else."""

from __future__ import annotations

import os

import pytest

from broker_core.protocol.record import BLANK, BLANK_MAGIC, HEADER, decode_record
from broker_core.raft.node import Role
from tests.broker_core.raft.disk import TOPIC, entry, open_storage
from tests.broker_core.raft.sim import Faults, Sim

SCHEDULES = int(os.environ.get("RAFT_DISK_SCHEDULES", "40"))
ROUGH = Faults(loss=0.1, duplicate=0.1, delay=(0.001, 0.08), crash_every_s=2.0,
               cut_every_s=3.0)


def crash_and_open(root, clock):
    """Each node's storage under `root`; its published mark saved on the sim's time."""
    def factory(name: str, old):
        if old is not None:  # a crash: no mark saved, no clean close of the log
            old.index.close()
            old.store.close()
        return open_storage(root / name, clock=clock)
    return factory


def payload(storage, n: int) -> bytes:
    return entry(storage, [f"v{n}".encode()])


@pytest.mark.parametrize("seed", range(SCHEDULES))
def test_schedules_on_real_stores_commit_the_same_messages_everywhere(tmp_path, seed):
    run_schedule(tmp_path, seed)


def test_crashed_nodes_come_back_from_their_mark_and_withdraw_what_follows(tmp_path):
    sim = run_schedule(tmp_path, 3)  # a schedule with crashes after commits
    back = [s.cut_on_start for s in sim.storage.values()]
    assert sim.crashes >= 3
    assert any(c["published"] > 0 and c["units_withdrawn"] > 0 for c in back), back


def run_schedule(tmp_path, seed: int) -> Sim:
    names = ["n0", "n1", "n2"]
    sims: list[Sim] = []
    factory = crash_and_open(tmp_path, lambda: sims[0].now if sims else 0.0)
    sims.append(sim := Sim(names, seed, ROUGH, storage_factory=factory, payload=payload))
    try:
        sim.run(12.0)
        sim.heal()
        sim.run(sim.now + 4.0, healthy=True)
        leader = sim.leader()
        assert leader is not None and leader.role is Role.LEADER, f"seed {seed}: no leader"
        # nothing more proposed: every node learns the last commit
        sim.run(sim.now + 1.0, propose_every=1e9, healthy=True)
        sim.check_all()
        committed = [m.body for i in sorted(sim.committed)
                     for m in decode(sim.committed[i][1])]
        assert committed, f"seed {seed}: nothing committed"
        for name in names:
            node, storage = sim.nodes[name], sim.storage[name]
            storage.publish(node.commit)
            got = storage.store.get(TOPIC, 0, 0, 100_000)
            seen = [m.body for m in got.messages]
            assert seen == committed, (
                f"seed {seed}: {name} shows {len(seen)} messages, {len(committed)} committed")
        return sim
    finally:
        for storage in sim.storage.values():
            storage.close()
            storage.store.close()


def decode(data: bytes):
    """The messages of an entry's bytes (a blank skipped)."""
    pos, out = 0, []
    while pos < len(data):
        size, magic = BLANK.unpack_from(data, pos)
        if magic != BLANK_MAGIC:
            out.append(decode_record(data, pos, HEADER.unpack_from(data, pos)[6], len(data)))
        pos += size
    return out
