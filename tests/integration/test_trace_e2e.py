"""A message traced end to end across two broker processes and two consumer groups,
read back through `floodgate trace` (real processes, real sockets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.message_id import decode_id

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def floodgate(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def consume(group: str, addrs, expect: int) -> list:
    got = []
    with Consumer(group, "orders", addrs, trace_rate=1.0) as consumer:
        deadline = time.monotonic() + 30
        while len(got) < expect and time.monotonic() < deadline:
            msgs = consumer.poll(64, timeout=0.5)
            got += msgs
            consumer.commit()
    return got


def trace_json(cluster_path, *args: str, until=lambda doc: True) -> dict:
    """`floodgate trace --json`, again until ``until`` holds (broker records come each second)."""
    deadline = time.monotonic() + 10
    while True:
        proc = floodgate("trace", "--cluster", str(cluster_path), *args, "--json")
        doc = json.loads(proc.stdout) if proc.stdout else {}
        if proc.returncode == 0 and until(doc) or time.monotonic() > deadline:
            return doc
        time.sleep(0.3)


def test_a_message_traced_across_two_brokers_and_two_groups(cluster_factory):
    cluster = cluster_factory(2)
    addrs = cluster.file.addrs
    with Producer(addrs, trace_rate=1.0) as producer:
        first = [producer.send("orders", f"paid {i}".encode(), keys=f"order-{i}")
                 for i in range(20)]
        assert consume("warehouse", addrs, 20) and consume("billing", addrs, 20)
        later = [producer.send("orders", f"paid {i}".encode(), keys=f"order-{i}")
                 for i in range(20, 40)]
        client = producer.client_id
    assert len(consume("billing", addrs, 20)) == 20  # warehouse stops reading here
    results = first + later
    assert {r.broker for r in results} == set(addrs)  # both brokers stored some
    for r in results:
        host, _phys = decode_id(r.msg_id)
        assert host == addrs[r.broker]

    # order-5: sent, stored and delivered to both groups, committed
    sent = first[5]
    doc = trace_json(cluster.path, "--key", "order-5", until=lambda d: d["timelines"] and
                     d["timelines"][0]["store"] and len(d["timelines"][0]["deliveries"]) == 2)
    [t] = doc["timelines"]
    assert t["id"] == sent.msg_id and t["broker"] == sent.broker
    assert (t["queue_id"], t["queue_offset"]) == (sent.queue_id, sent.queue_offset)
    assert t["send"]["client"] == client and t["send"]["broker"] == sent.broker
    assert t["send"]["attempts"] == 1 and t["send"]["status"] == "SEND_OK"
    assert t["store"]["code"] == "OK" and t["store"]["queue_offset"] == sent.queue_offset
    assert set(t["deliveries"]) == {"billing", "warehouse"}
    for group in ("billing", "warehouse"):
        [d] = t["deliveries"][group]
        assert d["committed_ms"] and d["delay_ms"] >= 0
    assert t["missing"] == []

    # order-30: billing got it, warehouse never did, and the trace says how far behind it is
    sent = later[10]
    doc = trace_json(cluster.path, "--key", "order-30", until=lambda d: d["timelines"] and
                     d["timelines"][0]["store"] and d["timelines"][0]["deliveries"])
    [t] = doc["timelines"]
    assert list(t["deliveries"]) == ["billing"]
    behind = sent.queue_offset - t["groups"]["warehouse"] + 1
    assert behind >= 1
    assert (f"stored, never delivered to group warehouse: its offset on queue "
            f"{sent.queue_id} is {behind:,} behind") in t["missing"]

    # the same by id, as text
    proc = floodgate("trace", "--cluster", str(cluster.path), "--id", sent.msg_id)
    assert proc.returncode == 0, proc.stderr
    assert f"stored on {sent.broker}: queue {sent.queue_id}" in proc.stdout
    assert "delivered to group billing" in proc.stdout
    assert "MISSING: stored, never delivered to group warehouse" in proc.stdout

    # bad input: one line each, exit 2 for bad usage, 1 for nothing found
    for args, code, text in (
        (["--id", "nothex"], 2, "bad message id 'nothex'"),
        (["--id", "Z" * 32], 2, "not hexadecimal"),
        (["--key", "two words"], 2, "a key is one word"),
        (["--key", "order-999"], 1, "no message with key 'order-999'"),
        (["--id", sent.msg_id[:16] + "0" * 15 + "3"], 1, "no message starts at offset 3"),
    ):
        proc = floodgate("trace", "--cluster", str(cluster.path), *args)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and text in proc.stderr, proc.stderr


def test_a_message_retried_into_the_dlq_and_a_delayed_one_trace_as_one_path_each(
        cluster_factory):
    """A message's copies (%SCHEDULE%, %RETRY%G, %DLQ%G, its real topic when due) each
    have an id of their own: the trace joins them in the order they were made and
    expects of each what its maker writes, so nothing true is called MISSING."""
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with Producer(addrs, trace_rate=1.0) as producer:
        failing = producer.send("orders", b"bad", keys="order-7")
        delayed = producer.send("orders", b"later", keys="order-d", delay="1s")
    seen: list[bytes] = []

    def handler(m) -> None:
        seen.append(m.body)
        if m.body == b"bad":
            raise RuntimeError("always fails")

    stop = threading.Event()
    billing = Consumer("billing", "orders", addrs, max_reconsume=1, retry_delay="1s",
                       trace_rate=1.0)
    worker = threading.Thread(target=billing.consume, args=(handler,),
                              kwargs={"timeout": 0.1, "stop": stop}, daemon=True)
    worker.start()
    deadline = time.monotonic() + 30
    while (seen.count(b"bad") < 2 or b"later" not in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the dead letter's send
    stop.set()
    worker.join(10)
    billing.close()  # its trace batches go out
    assert seen.count(b"bad") == 2 and b"later" in seen

    # order-7: sent, failed, sent back through %SCHEDULE% to %RETRY%billing, failed, dead
    doc = trace_json(cluster.path, "--key", "order-7", until=lambda d: len(d["timelines"]) == 4
                     and d["timelines"][2]["deliveries"]  # the brokers' summaries: a second
                     and not any(t["missing"] for t in d["timelines"]))
    first, held, retry, dead = doc["timelines"]
    assert first["id"] == failing.msg_id and first["copy"] is None
    assert first["deliveries"]["billing"][0]["committed_ms"]  # committed once sent back
    assert f"group billing failed it and sent it back: retry 1 as {held['id']}" in first["notes"]
    assert (held["topic"], held["copy"]["kind"], held["copy"]["origin"]) == (
        "%SCHEDULE%", "delayed", failing.msg_id)
    assert held["copy"]["to_topic"] == "%RETRY%billing" and held["copy"]["tries"] == 1
    assert held["send"]["client"] == billing.client_id  # the send-back is traced
    assert f"stored again in %RETRY%billing as {retry['id']}" in " ".join(held["notes"])
    assert (retry["topic"], retry["copy"]["kind"], retry["copy"]["made_from"]) == (
        "%RETRY%billing", "due", held["id"])
    assert retry["deliveries"]["billing"][0]["client"] == billing.client_id
    assert (dead["topic"], dead["copy"]["kind"], dead["copy"]["tries"]) == (
        "%DLQ%billing", "dead letter", 2)
    assert dead["send"]["client"] == billing.client_id
    assert [t["missing"] for t in doc["timelines"]] == [[], [], [], []]

    # by the id of any copy: the same path
    by_id = trace_json(cluster.path, "--id", retry["id"])
    assert [t["id"] for t in by_id["timelines"]] == [t["id"] for t in doc["timelines"]]

    # order-d: held in %SCHEDULE%, then stored in orders and delivered
    doc = trace_json(cluster.path, "--key", "order-d", until=lambda d: len(d["timelines"]) == 2
                     and d["timelines"][1]["deliveries"]
                     and not any(t["missing"] for t in d["timelines"]))
    held, due = doc["timelines"]
    assert held["id"] == delayed.msg_id and held["copy"]["kind"] == "delayed"
    assert due["topic"] == "orders" and due["copy"]["made_from"] == delayed.msg_id
    assert due["born_ms"] == held["born_ms"]  # end to end counts from the producer's send
    assert due["deliveries"]["billing"][0]["delay_ms"] >= 1000
    assert [t["missing"] for t in doc["timelines"]] == [[], []]

    proc = floodgate("trace", "--cluster", str(cluster.path), "--key", "order-7")
    assert proc.returncode == 0, proc.stderr
    assert "MISSING" not in proc.stdout
    assert f"(retry 1 of {failing.msg_id} for group billing: held in %SCHEDULE%" in proc.stdout
    assert f"sent back by {billing.client_id}" in proc.stdout
    assert "(dead letter of" in proc.stdout and "floodgate dlq show billing" in proc.stdout

    # the operator resends the dead letter: a fifth message on the same path
    proc = floodgate("dlq", "resend", "--cluster", str(cluster.path), "--group", "billing",
                     "--key", "order-7")
    assert proc.returncode == 0, proc.stderr
    doc = trace_json(cluster.path, "--key", "order-7", until=lambda d: len(d["timelines"]) == 5
                     and d["timelines"][4]["send"])
    resent = doc["timelines"][4]
    assert (resent["topic"], resent["copy"]["kind"], resent["copy"]["origin"]) == (
        "orders", "resent", failing.msg_id)
    assert resent["send"]["status"] == "SEND_OK"

def test_a_group_is_asked_until_its_master_answers(tmp_path, zookeeper):
    """A group's members hold the same log: the trace asks them in turn until one says it
    is the master (asking each woke the slaves for the same answer; a slave, or a member
    cut off after a failover, may lack the newest messages), past one that is down."""
    import uuid

    from broker_core.client import admin
    from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile
    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.ports import free_port_range
    from broker_core.cluster.trace_finder import TraceFinder

    cluster = Cluster(0, free_port_range(7), tmp_path / "c", segment_size="8M",
                      name=f"t{uuid.uuid4().hex[:8]}", groups=1, replicas=2,
                      replication="sync", zk=zookeeper.addr)
    cluster.up(timeout=60)
    try:
        from broker_core.cluster.roles import group_records

        leader = group_records(cluster.file)["group-1"].master
        [master] = [b for b in cluster.file.brokers if b.name == leader]
        [slave] = [b for b in cluster.file.brokers if b.name != leader]
        with Producer({master.name: master.addr}, trace_rate=1.0) as producer:
            sent = producer.send("orders", b"paid", keys="order-1")
        port = free_port_range(1)  # nothing listens there
        dead = BrokerEntry("dead", f"127.0.0.1:{port}", f"127.0.0.1:{port}", group="group-1")

        def trace(*members):
            finder = TraceFinder(ClusterFile("c", list(members)), timeout=2.0)
            deadline = time.monotonic() + 10
            try:
                while True:  # the producer's trace batch goes out within a second
                    result = finder.by_key("order-1", None, 0, None, 5)
                    if result.timelines and result.timelines[0].send or \
                            time.monotonic() > deadline:
                        return result
                    time.sleep(0.2)
            finally:
                finder.close()

        def answering(*members) -> list[str]:
            finder = TraceFinder(ClusterFile("c", list(members)), timeout=2.0)
            try:
                return [b.name for b, _answer in finder._each(lambda b: admin.query_by_key(
                    b.addr, "order-1", None, 0, None, 5, 2.0))]
            finally:
                finder.close()

        assert answering(dead, slave, master) == [slave.name, master.name]
        assert answering(master, slave) == [master.name]  # the slave is not woken
        past_both = trace(dead, slave, master)
        assert [t.id for t in past_both.timelines] == [sent.msg_id]
        assert past_both.timelines[0].send is not None
        assert list(past_both.unreachable) == ["dead"]
        master_first = trace(master, dead)
        assert [t.id for t in master_first.timelines] == [sent.msg_id]
        assert master_first.unreachable == {}  # never asked: the master answered first
    finally:
        cluster.down(grace=5.0)


def test_a_cluster_where_no_broker_answers_is_not_said_to_lack_the_message(tmp_path):
    from broker_core.cluster.cluster_file import BrokerEntry, ClusterFile
    from broker_core.cluster.ports import free_port_range

    port = free_port_range(1)  # nothing listens there
    path = tmp_path / "cluster.toml"
    ClusterFile("c", [BrokerEntry("b1", f"127.0.0.1:{port}", f"127.0.0.1:{port}")]).save(path)
    proc = floodgate("trace", "--cluster", str(path), "--key", "order-1")
    assert proc.returncode == 1
    assert "no broker of" in proc.stderr and "cannot tell whether key 'order-1' exists" in \
        proc.stderr and "no message with key" not in proc.stderr


def test_a_committed_transaction_traces_as_its_half_then_the_message_consumers_read(
        cluster_factory):
    from broker_core.client.transaction import TransactionProducer

    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with TransactionProducer("payments", addrs, end_oneway=False, trace_rate=1.0) as tx:
        result = tx.send_in_transaction("paid", b"42", lambda m: "COMMIT", keys="pay-42")
    assert result.ended
    doc = trace_json(cluster.path, "--key", "pay-42", until=lambda d: len(d["timelines"]) == 2
                     and not d["timelines"][0]["missing"])
    half, paid = doc["timelines"]
    assert (half["id"], half["topic"], half["copy"]["kind"]) == (
        result.send.msg_id, "%TX_HALF%", "half")
    assert half["send"]["status"] == "SEND_OK"
    assert (paid["topic"], paid["copy"]["kind"], paid["copy"]["made_from"]) == (
        "paid", "committed", half["id"])
    assert f"stored again in paid as {paid['id']}" in half["notes"]
    assert paid["send"] is None and half["missing"] == []  # the broker made it: no send
    assert paid["missing"] == ["no consumer group has read this queue yet"]
