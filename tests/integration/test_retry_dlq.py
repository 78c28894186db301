"""Consumer retry and the dead-letter queue through a real broker: a message whose
handler fails comes back to the same group after its delay, with its retry count and
first topic; one that fails every time lands in %DLQ%<group> after exactly
max_reconsume retries; another group of the topic sees each message once; nothing
is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.client.retry import PROP_ORIGIN_ID, retry_times
from tests.broker_core.client.live_brokers import bodies
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_failed_messages_retry_for_their_group_only_and_the_hopeless_reach_the_dlq(
        cluster_factory):
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with Producer(addrs) as p:
        ids = {f"m{i}".encode(): p.send("orders", f"m{i}".encode()).msg_id for i in range(20)}
    seen: Counter = Counter()
    first_topics, times = set(), {}
    failed_once: set[bytes] = set()

    def handler(m) -> None:
        seen[m.body] += 1
        first_topics.add(m.topic)
        times[m.body] = retry_times(m)
        if m.body == b"m7":
            raise RuntimeError("always fails")
        if m.body == b"m3" and m.body not in failed_once:
            failed_once.add(m.body)
            raise RuntimeError("fails once")

    stop = threading.Event()
    billing = Consumer("billing", "orders", addrs, max_reconsume=2, retry_delay="1s")
    worker = threading.Thread(target=billing.consume, args=(handler,),
                              kwargs={"timeout": 0.1, "stop": stop}, daemon=True)
    worker.start()
    deadline = time.monotonic() + 30
    while seen[b"m7"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    # its third failure sent it to the dead-letter queue, not to another retry: once it
    # is there, nothing of it can come again
    addr = next(iter(addrs.values()))
    wait_for(lambda: bodies(addr, "%DLQ%billing"), 10, "m7 in the dead-letter queue")
    stop.set()
    worker.join(10)
    billing.close()

    assert seen[b"m7"] == 3  # the first try and max_reconsume (2) retries
    assert seen[b"m3"] == 2 and times[b"m3"] == 1
    assert all(seen[b] == 1 for b in ids if b not in (b"m3", b"m7"))
    assert first_topics == {"orders"}  # retries shown with the topic they were sent to

    with Consumer("%DLQ%billing-reader", "%DLQ%billing", addrs, retry=False) as dlq:
        dead = []
        end = time.monotonic() + 10
        while not dead and time.monotonic() < end:
            dead += dlq.poll(timeout=0.2)
    assert [m.body for m in dead] == [b"m7"]
    assert retry_times(dead[0]) == 3 and dead[0].properties[PROP_ORIGIN_ID] == ids[b"m7"]

    with Consumer("audit", "orders", addrs) as audit:  # another group: no retries at all
        got = []
        end = time.monotonic() + 10
        while len(got) < 20 and time.monotonic() < end:
            got += audit.poll(timeout=0.2)
    assert sorted(m.body for m in got) == sorted(ids)


def test_a_message_that_cannot_be_sent_back_is_read_again_not_committed_past(
        cluster_factory):
    from broker_core.client.attempts import SendFailed
    from broker_core.cluster.ports import free_port_range

    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with Producer(addrs) as p:
        for i in range(3):
            p.send("orders", b"q%d" % i)
    consumer = Consumer("g", "orders", addrs)
    # its send-backs go to a broker that is not there
    consumer._sender = Producer({"gone": f"127.0.0.1:{free_port_range(1)}"}, retries=0,
                                timeout=1)
    try:
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            got += consumer.poll(timeout=0.2)
        failing = got[0]
        with pytest.raises(SendFailed):
            consumer.nack(failing)
        consumer.commit()  # up to before the failed one, in its queue
        again = []
        deadline = time.monotonic() + 10
        while failing.body not in [m.body for m in again] and time.monotonic() < deadline:
            again += consumer.poll(timeout=0.2)
        assert failing.body in [m.body for m in again]
    finally:
        consumer.close()


def test_a_group_behind_on_its_topic_still_gets_its_retries_when_due(cluster_factory):
    """The retry topic takes turns with the topic: a consumer with a backlog fills every
    batch from the topic, and its retries used to wait until it had caught up (with a
    slow group behind by an hour, an hour past their delay; their queues read STALLED)."""
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    backlog = 5000
    with Producer(addrs) as p:
        for start in range(0, backlog, 250):
            p.send_batch("orders", [b"b%d" % i for i in range(start, start + 250)])
    consumer = Consumer("slow", "orders", addrs, retry_delay="1s")
    try:
        read, retried = 0, None
        deadline = time.monotonic() + 30
        while retried is None and time.monotonic() < deadline:
            for m in consumer.poll(max_msgs=4, timeout=0.2):
                if read == 0:
                    consumer.nack(m)  # the first message fails once
                elif retry_times(m):
                    retried = m
                read += 1
            consumer.commit()
            time.sleep(0.01)  # a slow handler: ~400 messages a second at most
        assert retried is not None and retried.topic == "orders"
        assert read < backlog  # came while the topic's backlog was still being read
    finally:
        consumer.close()
