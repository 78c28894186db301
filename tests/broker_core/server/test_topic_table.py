"""The topic table: queues per topic, permissions per topic and for the broker,
deletions remembered through recovery, the first file format read, and a slave
adopting its master's table."""

from __future__ import annotations

import json

import pytest

from broker_core.server.topic_table import TopicError, TopicTable


def table(tmp_path, **kw) -> TopicTable:
    return TopicTable(tmp_path / "topics.json", **kw)


def test_permissions_refuse_what_they_must_and_survive_a_restart(tmp_path):
    t = table(tmp_path)
    t.put("orders", 8, "r")
    assert t.write_refusal("orders", "b1") == "topic 'orders' is not writable on b1 (permission r)"
    assert t.read_refusal("orders", "b1") is None
    t.put("audit", perm="w")
    assert t.read_refusal("audit", "b1") and t.write_refusal("audit", "b1") is None
    t.set_writable(False)
    assert "b1's writes are wiped" in t.write_refusal("audit", "b1")
    t.save()
    back = table(tmp_path)
    assert (back.queues, back.perm("orders"), back.perm("audit"), back.writable) == (
        {"orders": 8, "audit": 4}, "r", "w", False)
    back.put("orders", perm="rw")
    assert back.perms == {"audit": "w"}  # rw is the default: not written down


def test_queues_only_grow_and_bad_input_is_named(tmp_path):
    t = table(tmp_path)
    t.put("orders", 8)
    with pytest.raises(TopicError, match="can only grow .* queues 4..7 would be stranded"):
        t.put("orders", 4)
    with pytest.raises(TopicError, match="queues must be 1..1024, not 0"):
        t.put("orders", 0)
    with pytest.raises(TopicError, match="permission must be one of rw, r, w, -"):
        t.put("orders", perm="x")
    with pytest.raises(TopicError, match="illegal topic name 'bad topic!'"):
        t.put("bad topic!")
    assert t.queues == {"orders": 8}


def test_a_deleted_topic_is_not_made_again_by_recovery_until_it_is_sent_to(tmp_path):
    t = table(tmp_path)
    t.get("orders", create=True)
    assert t.delete("orders", now=100.0) and not t.delete("orders", now=101.0)
    assert t.recover([("orders", 0), ("orders", 3), ("lost", 5)]) == ["lost"]
    assert "orders" not in t.queues and t.queues["lost"] == 6
    assert t.get("orders", create=True) == 4  # auto-created by a new send: no longer deleted
    assert "orders" not in t.deleted


def test_the_first_format_reads_as_read_write(tmp_path):
    (tmp_path / "topics.json").write_text(json.dumps({"orders": 8, "audit": 4}))
    t = table(tmp_path)
    assert t.queues == {"orders": 8, "audit": 4} and t.perm("orders") == "rw" and t.writable


def test_a_slave_adopts_its_masters_table_keeping_topics_the_records_announced(tmp_path):
    master, slave = table(tmp_path / "m"), table(tmp_path / "s")
    for t in (master, slave):
        t.path.parent.mkdir(parents=True, exist_ok=True)
    master.put("orders", 8, "r")
    master.put("gone")
    master.delete("gone", now=1.0)
    master.set_writable(False)
    slave.grow({"gone": 4, "fresh": 4})  # seen in records before the master's table came
    slave.adopt(master.document())
    assert slave.queues == {"orders": 8, "fresh": 4}
    assert (slave.perm("orders"), slave.writable, slave.deleted) == ("r", False, {"gone": 1.0})
    assert slave.dirty
    slave.take()
    slave.adopt(master.document())
    assert not slave.dirty  # the same table again: nothing to save


def test_the_brokers_own_topics_stay_out_of_the_table_on_master_and_slave_alike(tmp_path):
    """%SCHEDULE%, %TX_HALF% and %TX_OP% are the broker's, read through its store: a slave
    learnt them from its records and a restarted master from its store, and `topic list`
    showed a slave with three topics more than its master."""
    t = table(tmp_path)
    assert t.recover([("%SCHEDULE%", 2), ("%TX_HALF%", 0), ("%TX_OP%", 0), ("orders", 1)]) == [
        "orders"]
    assert not t.grow({"%SCHEDULE%": 18, "%TX_OP%": 4}) and set(t.queues) == {"orders"}
    t.grow({"%RETRY%billing": 4})  # a group's retry topic is a client's: kept
    assert set(t.queues) == {"orders", "%RETRY%billing"}
    (tmp_path / "topics.json").write_text(json.dumps(
        {"topics": {"orders": 4, "%SCHEDULE%": 4, "%TX_HALF%": 4}}))  # saved by a version before
    again = table(tmp_path)
    assert again.queues == {"orders": 4} and again.dirty
