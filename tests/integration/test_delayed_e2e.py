"""Delayed messages end to end, through a real broker process: a delayed send is
acknowledged at once and reaches its consumers when due (not before), and what was
pending when the broker was SIGKILLed is delivered after its restart."""

from __future__ import annotations

import signal
import time

import pytest

from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.cluster.health import wait_healthy
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def collect(consumer: Consumer, want: int, timeout: float) -> list[tuple[float, bytes]]:
    got, deadline = [], time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += [(time.time(), m.body) for m in consumer.poll(64, timeout=0.1)]
    return got


def test_a_delayed_send_is_acked_now_and_consumed_when_due(cluster_factory):
    cluster = cluster_factory(1)
    with Producer(cluster.file.addrs) as p, Consumer("g", "orders", cluster.file.addrs) as c:
        c.poll(timeout=0.5)  # joined, owning every queue
        sent = time.time()
        r = p.send("orders", b"later", delay="1s")
        assert r.status == "SEND_OK" and time.time() - sent < 0.5
        p.send("orders", b"now")
        got = collect(c, 2, 10)
    assert [b for _, b in got] == [b"now", b"later"]
    late = got[1][0] - sent
    assert 1.0 <= late < 2.0, late  # due one second after it was stored, delivered then


def test_pending_delayed_messages_are_delivered_after_a_sigkill(cluster_factory):
    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    with Producer(cluster.file.addrs) as p:
        for i in range(20):
            p.send("orders", b"d%d" % i, delay="1s")  # due before the restart is done
    cluster.procs[entry.name].send_signal(signal.SIGKILL)
    cluster.procs[entry.name].wait(10)
    cluster.start_broker(entry)
    wait_healthy(entry.http, 30, cluster.procs[entry.name])
    with Consumer("g", "orders", cluster.file.addrs) as c:
        got = collect(c, 20, 20)
    assert sorted(b for _, b in got) == sorted(b"d%d" % i for i in range(20))


def test_status_names_the_delayed_messages_table(cluster_factory, capsys):
    """`floodgate status` prints the brokers' pending delayed messages under a heading
    that says what they are (the table came headless, after the groups' lines)."""
    from console.cli import main

    cluster = cluster_factory(1)
    with Producer(cluster.file.addrs) as p:
        p.send("orders", b"tomorrow", delay="1h")
    title = "delayed messages, retries included (held in %SCHEDULE% until due)"

    def status() -> list[str] | None:
        # a ticking broker's /stats is its last tick's, at most a second old: the send
        # shows there by the next tick (a one-look status taken in that second missed it)
        main(["status", "--cluster", str(cluster.path)])
        lines = capsys.readouterr().out.splitlines()
        return lines if title in lines else None

    out = wait_for(status, 10, "status to show the delayed message")
    heading = out.index(title)
    assert out[heading + 1].split()[:2] == ["broker", "pending"]
    assert out[heading + 2].split() == ["broker-1", "1", "-", "1h", "1"]
