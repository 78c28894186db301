"""An operator's reset of a group's offsets: commits from consumers that have not
heard of it are not stored, and a slave takes a reset from its master even where it
moves offsets back (an ordinary merge never does)."""

from __future__ import annotations

from broker_core.server.group_state import OffsetTable


def test_a_commit_from_before_the_reset_is_not_stored(tmp_path):
    t = OffsetTable(tmp_path / "offsets.json")
    assert t.commit("g", "orders", 0, 100, reset=0)
    t.reset("g", "orders", {0: 40, 1: 7}, epoch=5_000)
    assert not t.commit("g", "orders", 0, 101, reset=0)  # a consumer still on the old range
    assert t.get("g", "orders", 0) == 40
    assert t.commit("g", "orders", 0, 41, reset=5_000)  # one that heard of it
    assert t.commit("other", "orders", 0, 3)  # other groups are untouched
    assert t.get("g", "orders", 1) == 7


def test_a_slave_takes_its_masters_reset_back_as_well_as_forward(tmp_path):
    master, slave = OffsetTable(tmp_path / "m.json"), OffsetTable(tmp_path / "s.json")
    for t in (master, slave):
        t.commit("g", "orders", 0, 100)
        t.commit("h", "orders", 0, 9)
    master.reset("g", "orders", {0: 10}, epoch=7_000)
    doc, resets = master.nested(), dict(master.resets)
    slave.merge(doc)
    assert slave.get("g", "orders", 0) == 100  # merge alone never moves one back
    slave.adopt_resets(doc, resets)
    assert slave.get("g", "orders", 0) == 10 and slave.resets == {"g": 7_000}
    assert slave.get("h", "orders", 0) == 9
    slave.commit("g", "orders", 0, 12, reset=7_000)
    slave.adopt_resets(doc, resets)  # the same reset again: nothing moves back
    assert slave.get("g", "orders", 0) == 12
