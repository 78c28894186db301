"""One rule for a name that ends up in a record: the topic table took "orders.eu" while
the store refused every send to it. Whatever the table, the quotas or a consumer group's
check take, the store writes; whatever the store refuses, they refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.errors import MessageIllegalError
from broker_core.protocol.record import topic_field
from broker_core.protocol.system_topics import DLQ_PREFIX, RETRY_PREFIX, check_group
from broker_core.server.flow_control import TARGET_RE
from broker_core.server.topic_table import TopicError, TopicTable, check_name

names = st.text("ab09_-%|.! /é", max_size=130)


def takes(check, name: str) -> bool:
    try:
        check(name)
    except (TopicError, MessageIllegalError, ValueError):
        return False
    return True


@given(names)
def test_the_topic_table_takes_exactly_what_the_store_writes(name):
    assert takes(check_name, name) == takes(topic_field, name)
    if takes(check_name, name):  # a quota names any topic (and producer groups with ".")
        assert TARGET_RE.match(name)


@given(names)
def test_a_group_taken_has_retry_and_dead_letter_topics_the_store_writes(name):
    if takes(check_group, name):
        assert takes(topic_field, RETRY_PREFIX + name) and takes(topic_field, DLQ_PREFIX + name)


def test_a_dotted_topic_is_refused_and_one_made_before_is_dropped_as_the_table_opens(
        tmp_path, caplog):
    table = TopicTable(tmp_path / "topics.json")
    with pytest.raises(TopicError, match="illegal topic name 'orders.eu'"):
        table.put("orders.eu", 4)
    (tmp_path / "old.json").write_text(  # written when the table's rule let "." in
        '{"topics": {"orders.eu": 4, "orders": 8}, "perms": {"orders.eu": "r"}}')
    old = TopicTable(tmp_path / "old.json")
    assert old.queues == {"orders": 8} and old.perms == {}  # it could hold no message
    assert "topic 'orders.eu' dropped from the table" in caplog.text
    assert old.dirty  # saved without it at the next tick: said once, not at every start
