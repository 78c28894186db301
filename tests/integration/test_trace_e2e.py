"""A message traced end to end across two broker processes and two consumer groups,
read back through `floodgate trace` (real processes, real sockets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
