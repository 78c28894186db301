"""Broadcast consumption against a real broker: every instance reads every message,
each keeps its offsets in its own file (a restarted instance goes on from there), a
clustering group of the same topic is untouched, and the broker judges each
instance's lag from its heartbeats."""

from __future__ import annotations

import json
import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.protocol import Op, decode_json, encode_json

pytestmark = pytest.mark.timeout(60)

TOPIC = "prices"


def produce(addr: str, first: int, n: int) -> set[bytes]:
    bodies = {f"price-{i}".encode() for i in range(first, first + n)}
    with Producer({"b1": addr}, retries=0) as producer:
        for body in sorted(bodies):
            producer.send(TOPIC, body)
    return bodies


def drain(consumer: Consumer, want: int) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(100):
        got += [m.body for m in consumer.poll(max_msgs=64, timeout=0.2)]
        consumer.commit()
        if len(got) >= want:
            break
    return got


def instance(addr: str, cid: str, path) -> Consumer:
    return Consumer("cache", TOPIC, {"b1": addr}, client_id=cid, broadcast=True,
                    offsets_file=path)


def test_two_instances_each_get_everything_and_a_restart_goes_on_from_its_file(
        broker_addr, tmp_path):
    sent = produce(broker_addr, 0, 40)
    a = instance(broker_addr, "host-a", tmp_path / "a.json")
    b = instance(broker_addr, "host-b", tmp_path / "b.json")
    got_a, got_b = drain(a, 40), drain(b, 40)
    assert sorted(got_a) == sorted(sent)  # each instance: all of it, once
    assert sorted(got_b) == sorted(sent)
    assert len(a.assignment) == len(b.assignment) == 4  # every queue, not a share
    a.close()
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["group"] == "cache"
    assert sum(saved["offsets"]["b1"].values()) == 40

    more = produce(broker_addr, 40, 10)
    again = instance(broker_addr, "host-a", tmp_path / "a.json")
    assert sorted(drain(again, 10)) == sorted(more)  # from its file: nothing read twice
    again.close()
    b.close()


def test_a_clustering_group_of_the_same_name_keeps_its_offsets(broker_addr, tmp_path):
    sent = produce(broker_addr, 0, 12)
    with instance(broker_addr, "host-a", tmp_path / "a.json") as a:
        assert sorted(drain(a, 12)) == sorted(sent)
    with Consumer("cache", TOPIC, {"b1": broker_addr}) as clustering:  # offsets on the broker
        assert sorted(drain(clustering, 12)) == sorted(sent)


def test_the_broker_judges_each_instance_lag_from_its_heartbeats(broker_addr, tmp_path):
    produce(broker_addr, 0, 30)
    a = instance(broker_addr, "host-a", tmp_path / "a.json")
    assert len(drain(a, 30)) == 30
    b = instance(broker_addr, "host-b", tmp_path / "b.json")
    assert len(b.poll(max_msgs=5, timeout=2)) == 5
    b.commit()
    b.heartbeat()  # 25 behind
    a.heartbeat()
    deadline = time.monotonic() + 10
    while True:
        _code, body = a._pool.get("b1").call(Op.STATS, encode_json({}), timeout=5)
        consumers = decode_json(body)["consumers"]
        if {"cache@host-a", "cache@host-b"} <= set(consumers):
            break
        assert time.monotonic() < deadline, consumers
        time.sleep(0.2)
    assert consumers["cache@host-a"]["lag"] == 0
    assert consumers["cache@host-a"]["instance_of"] == "cache"
    assert consumers["cache@host-b"]["lag"] == 25
    a.close()
    b.close()


def test_a_broadcast_consumer_names_its_file_and_does_not_send_back(broker_addr, tmp_path):
    with pytest.raises(ValueError, match="offsets_file"):
        Consumer("cache", TOPIC, {"b1": broker_addr}, broadcast=True)
    (tmp_path / "other.json").write_text(json.dumps(
        {"group": "other", "topic": TOPIC, "offsets": {}}))
    with pytest.raises(ValueError, match="holds group 'other'"):
        instance(broker_addr, "host-a", tmp_path / "other.json")
    produce(broker_addr, 0, 4)
    with instance(broker_addr, "host-a", tmp_path / "a.json") as a:
        msgs = a.poll(max_msgs=4, timeout=2)
        assert msgs
        with pytest.raises(ValueError, match="does not send messages back"):
            a.nack(msgs[0])
