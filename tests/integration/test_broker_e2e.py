"""The broker end to end, through real processes and real sockets."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import pyarrow.parquet as pq
import pytest

from broker_core import protocol as p
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer, SendFailed
from broker_core.cluster.health import wait_healthy
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def _stats(http: str, history: int = 0) -> dict:
    with urllib.request.urlopen(f"http://{http}/stats?history={history}", timeout=5) as r:
        return json.loads(r.read())


def _consume_all(consumer: Consumer, expect: int, timeout: float = 30.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        got += consumer.poll(128, timeout=0.5)
    return got


def test_produce_and_consume_10000_with_tags(cluster_factory):
    cluster = cluster_factory(2)
    addrs = cluster.file.addrs
    with Producer(addrs) as producer:
        futs = [producer.send_async("orders", f"m{i}".encode(), tags="paid" if i % 2 else "new",
                                    keys=f"k{i}") for i in range(10_000)]
        results = [f.result(30) for f in futs]
    assert {r.status for r in results} == {"SEND_OK"}
    assert {r.broker for r in results} == set(addrs)  # switches broker every send
    with Consumer("g-all", "orders", addrs) as consumer:
        got = _consume_all(consumer, 10_000)
    bodies = sorted(m.body for m in got)
    assert bodies == sorted(f"m{i}".encode() for i in range(10_000))
    assert all(m.keys == "k" + m.body.decode()[1:] for m in got[:100])
    # each broker counts exactly the sends it stored (refused ones went elsewhere)
    first = cluster.file.brokers[0]
    stored_there = sum(1 for r in results if r.broker == first.name)
    deadline = time.monotonic() + 5
    while (s := _stats(first.http))["totals"]["messages_in"] < stored_there:
        assert time.monotonic() < deadline, (s["totals"], stored_there)
        time.sleep(0.2)  # totals come from closed seconds
    assert s["totals"]["messages_in"] == stored_there and s["ops"]["send"]["60s"]["count"] > 0
    assert all(r.broker_s is not None and r.broker_s < 3.0 for r in results)


def test_two_consumers_split_the_queues_and_offsets_survive_restart(cluster_factory):
    cluster = cluster_factory(1)
    addrs = cluster.file.addrs
    with Producer(addrs, fuse=False) as producer:
        for i in range(400):
            producer.send("jobs", str(i).encode())
    a, b = Consumer("g", "jobs", addrs), Consumer("g", "jobs", addrs)
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # now both know both members
    assert sorted(a.assignment + b.assignment) == sorted(
        (name, q) for name in addrs for q in range(4))
    assert not set(a.assignment) & set(b.assignment)
    got_a, got_b = _consume_all(a, 200, 10), _consume_all(b, 200, 10)
    assert len(got_a) == len(got_b) == 200
    a.commit()
    b.commit()
    a.close()
    b.close()
    # restart the broker: committed offsets are on its disk
    entry = cluster.file.brokers[0]
    cluster.procs[entry.name].send_signal(signal.SIGTERM)
    cluster.procs[entry.name].wait(15)
    cluster.start_broker(entry)
    wait_healthy(entry.http, 30)
    with Producer(addrs, fuse=False) as producer:
        for i in range(400, 410):
            producer.send("jobs", str(i).encode())
    with Consumer("g", "jobs", addrs) as c:
        rest = _consume_all(c, 10, 10)
    assert sorted(int(m.body) for m in rest) == list(range(400, 410))


def _frame_conn(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def _read_frame(s: socket.socket) -> tuple[p.Header, bytes]:
    data = b""
    while len(data) < p.HEADER_SIZE:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    header = p.decode_header(data)
    need = p.LENGTH_SIZE + header.length
    while len(data) < need:
        data += s.recv(65536)
    return header, data[p.HEADER_SIZE:need]


def test_bad_input_is_answered_and_the_broker_keeps_serving(cluster_factory):
    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    # wrong magic: BAD_REQUEST, then closed
    s = _frame_conn(entry.addr)
    s.sendall(struct.pack(">IHBBBBHI", 12, 0xDEAD, 1, 1, 0, 0, 0, 7))
    header, body = _read_frame(s)
    assert header.code == p.Code.BAD_REQUEST and b"magic" in body
    assert s.recv(10) == b""
    # oversized length: refused before reading 2 GB
    s = _frame_conn(entry.addr)
    s.sendall(struct.pack(">IHBBBBHI", 2**31, p.MAGIC, 1, 1, 0, 0, 0, 7))
    header, body = _read_frame(s)
    assert header.code == p.Code.BAD_REQUEST and b"exceeds" in body
    # malformed body: BAD_REQUEST, connection stays usable
    s = _frame_conn(entry.addr)
    s.sendall(p.encode_frame(p.Op.SEND, 9, b"\x00\x05ab"))
    header, body = _read_frame(s)
    assert header.request_id == 9 and header.code == p.Code.BAD_REQUEST
    s.sendall(p.encode_frame(p.Op.SEND, 10, p.encode_send("t", -1, p.OutMessage(b"ok"))))
    assert _read_frame(s)[0].code == p.Code.OK
    # unknown op
    s.sendall(p.encode_frame(99, 11, b""))
    assert _read_frame(s)[0].code == p.Code.BAD_REQUEST
    # oversized message body: MESSAGE_TOO_LARGE
    big = p.encode_send("t", -1, p.OutMessage(b"x" * (4 * 1024 * 1024 + 1)))
    s.sendall(p.encode_frame(p.Op.SEND, 12, big))
    assert _read_frame(s)[0].code == p.Code.MESSAGE_TOO_LARGE
    # 1,000 idle connections plus a truncated frame: everyone else is still served
    idle = [_frame_conn(entry.addr) for _ in range(1000)]
    loris = _frame_conn(entry.addr)
    loris.sendall(p.encode_frame(p.Op.SEND, 1, b"x" * 100)[:20])
    with Producer(cluster.file.addrs, fuse=False, timeout=5) as producer:
        t0 = time.perf_counter()
        for _ in range(200):
            assert producer.send("t", b"still here").status == "SEND_OK"
        assert time.perf_counter() - t0 < 10
    for c in idle:
        c.close()
    # /stats is the snapshot of the broker's last tick (once a second)
    deadline = time.monotonic() + 5
    while _stats(entry.http)["totals"]["bad_requests"] < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _stats(entry.http)["totals"]["bad_requests"] >= 4


def test_sigkill_under_sync_flush_loses_no_acknowledged_message(cluster_factory, tmp_path):
    cluster = cluster_factory(1, flush="sync")
    entry = cluster.file.brokers[0]
    acked = []
    stop = threading.Event()

    def produce():
        with Producer(cluster.file.addrs, fuse=False, timeout=2, retries=0) as producer:
            futs = []
            i = 0
            while not stop.is_set():
                futs.append((i, producer.send_async("durable", str(i).encode())))
                i += 1
                if len(futs) >= 32:
                    j, f = futs.pop(0)
                    try:
                        if f.result(5).status == "SEND_OK":
                            acked.append(j)
                    except Exception:  # noqa: BLE001 - the broker dies mid-flight
                        pass

    t = threading.Thread(target=produce)
    t.start()
    deadline = time.monotonic() + 20
    while len(acked) < 500 and time.monotonic() < deadline:  # killed under load
        time.sleep(0.05)
    cluster.procs[entry.name].send_signal(signal.SIGKILL)
    cluster.procs[entry.name].wait(10)
    stop.set()
    t.join(30)
    assert len(acked) > 100
    cluster.start_broker(entry)
    wait_healthy(entry.http, 60)
    # read until every acknowledged message came back or the queues ran dry: counting
    # to len(acked) could stop early, as messages stored but not yet acknowledged when the
    # broker died are there too, and the queues are read in turn
    stored: set[int] = set()
    deadline = time.monotonic() + 30
    with Consumer("check", "durable", cluster.file.addrs) as consumer:
        while not set(acked) <= stored and time.monotonic() < deadline:
            batch = consumer.poll(128, timeout=1.0)
            if not batch and stored:
                break  # dry for a second: nothing more was kept
            stored.update(int(m.body) for m in batch)
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"


def test_injected_stall_shows_in_histograms_and_metrics_log(cluster_factory):
    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    cli = [sys.executable, "-m", "console.cli"]
    subprocess.run(cli + ["fault", "inject", "--broker", entry.http, "--stall-ms", "300",
                          "--every", "1", "--duration", "3"], check=True, capture_output=True)
    served = []
    with Producer(cluster.file.addrs, fuse=False, timeout=5) as producer:
        end = time.monotonic() + 3.5
        while time.monotonic() < end:
            try:
                served.append(producer.send("stalls", b"x").broker_s)
            except SendFailed:
                pass  # SYSTEM_BUSY during a stall is the point
            time.sleep(0.005)
    # the broker's own service time in its answers: the stall is the broker's part
    assert max(served) >= 0.1 and min(served) < 0.02

    def worst() -> float:  # the broker closes each second on its tick
        s = _stats(entry.http, history=30)
        return max((h["max"] or 0 for h in s["history"]["send"]), default=0.0) \
            if s["totals"]["send_over_20ms"] >= 1 else 0.0

    deadline = time.monotonic() + 10
    while worst() < 0.2:  # the stall is in the per-second histograms
        assert time.monotonic() < deadline, _stats(entry.http, history=30)["totals"]
        time.sleep(0.1)
    with urllib.request.urlopen(f"http://{entry.http}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    over = [line for line in metrics.splitlines()
            if line.startswith("floodgate_send_over_20ms_total")]
    assert over and float(over[0].split()[-1]) >= 1
    # SIGTERM closes the metrics-log file; it reads back in the schema of docs/architecture.md
    cluster.down()
    files = list((cluster.metrics_dir / "latency").rglob(f"part-{entry.name}-*.parquet"))
    assert files and not any(f.name.startswith(".") for f in files)
    table = pq.read_table(files[0])
    rows = table.to_pylist()
    sends = [r for r in rows if r["op"] == "send"]
    assert sends and all(r["count"] == sum(c for _, c in r["buckets"]) for r in sends)
    assert max(r["max_us"] for r in sends) >= 200_000
    assert (cluster.metrics_dir / "broker_stats").exists()


def test_sigterm_shuts_down_cleanly(cluster_factory):
    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    with Producer(cluster.file.addrs, fuse=False) as producer:
        producer.send("t", b"x")
    proc = cluster.procs[entry.name]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert not os.path.exists(os.path.join(entry.data, "store", "abort"))
    log = (cluster.log_dir / f"{entry.name}.log").read_text()
    assert "stopped broker=broker-1 cleanly" in log


def test_a_clusters_brokers_write_one_metrics_log(cluster_factory):
    """`cluster up`: every broker's files in DATA/metrics, the one --input of a report."""
    cluster = cluster_factory(2)
    with Producer(cluster.file.addrs, fuse=False) as producer:
        for _ in range(4):  # switches broker every send
            producer.send("t", b"x")
    cluster.down()  # SIGTERM: each broker writes what it holds, the second under way too
    files = list((cluster.metrics_dir / "latency").rglob("*.parquet"))
    assert {f.name.rsplit("-", 1)[0] for f in files} == {"part-broker-1", "part-broker-2"}
    rows = [r for f in files for r in pq.read_table(f).to_pylist() if r["op"] == "send"]
    assert sum(r["count"] for r in rows) == 4  # none lost in a second still open at the stop
    stats = [r for f in (cluster.metrics_dir / "broker_stats").rglob("*.parquet")
             for r in pq.read_table(f).to_pylist()]
    assert sum(r["msgs_in_per_s"] for r in stats) == 4  # the broker's figures, those seconds too
    assert not any((cluster.data / b.name / "metrics").exists() for b in cluster.file.brokers)


def test_batches_are_stored_in_one_queue_in_order(cluster_factory):
    cluster = cluster_factory(1)
    with Producer(cluster.file.addrs, fuse=False) as producer:
        result = producer.send_batch("batched", [f"b{i}".encode() for i in range(100)])
        assert result.status == "SEND_OK" and result.count == 100
        with pytest.raises(SendFailed, match="MESSAGE_TOO_LARGE"):
            producer.send_batch("batched", [b"x" * (3 * 1024 * 1024)] * 2)
    with Consumer("g-batch", "batched", cluster.file.addrs) as consumer:
        got = _consume_all(consumer, 100, 10)
    assert [m.body for m in got] == [f"b{i}".encode() for i in range(100)]
    assert {m.queue_id for m in got} == {result.queue_id}
    assert [m.queue_offset for m in got] == list(range(result.queue_offset,
                                                       result.queue_offset + 100))


def test_async_producer_pipelines_and_retries_on_another_broker(cluster_factory):
    import asyncio

    from broker_core.client.aio_producer import AsyncProducer

    cluster = cluster_factory(2)
    first = cluster.file.brokers[0]

    async def scenario():
        async with AsyncProducer(cluster.file.addrs, fuse=False, timeout=2) as producer:
            results = await asyncio.gather(*(producer.send("aio", str(i).encode())
                                             for i in range(2000)))
            assert {r.status for r in results} == {"SEND_OK"}
            assert {r.broker for r in results} == set(cluster.file.addrs)
            cluster.procs[first.name].send_signal(signal.SIGKILL)
            cluster.procs[first.name].wait(10)
            after = await asyncio.gather(*(producer.send("aio", b"after") for _ in range(50)))
            assert {r.broker for r in after} == {cluster.file.brokers[1].name}
            assert any(r.attempts == 2 for r in after)  # the dead broker was tried first

    asyncio.run(scenario())


def test_a_paced_load_signs_in_before_its_start_and_sends_nothing_earlier(cluster_factory):
    """`bench produce --start-at`: connected while it waits (the trace's sender too), the
    first send at the start. Connecting on the first sends put the schedule behind by the
    handshakes, and what fell due meanwhile went out in one burst."""
    from broker_core.client.loadgen import LoadGenerator, LoadSpec

    cluster = cluster_factory(1)
    broker = cluster.file.brokers[0]
    # mid-second: the broker counts a send just after a boundary in the second before,
    # until its tick closes that second (a ms or so)
    start_at = int(time.time()) + 3.5
    seen: list[tuple[float, dict]] = []

    def watch() -> None:  # the broker while the load waits for its start
        while time.time() < start_at - 0.5:
            stats = _stats(broker.http)
            if stats["totals"]["connections"] >= 2:
                seen.append((time.time(), stats))
                return
            time.sleep(0.05)

    with Producer(cluster.file.addrs, fuse=False, trace_rate=1.0) as producer:
        gen = LoadGenerator(producer, LoadSpec("paced", count=40, rate=200, start_at=start_at))
        watcher = threading.Thread(target=watch)
        watcher.start()
        result = gen.run()
        watcher.join()
    assert seen, "the producer and its trace sender were not both connected before the start"
    at, before = seen[0]
    assert at < start_at and before["totals"]["messages_in"] == 0
    assert result.acked == 40 and gen.started >= start_at
    # the history holds closed seconds; their messages, not their requests (on a busy host
    # the producer sends what fell due together, several messages a request)
    wait_for(lambda: _stats(broker.http)["totals"]["messages_in"] >= 40, 20,
             "the 40 sends in closed seconds")
    sends = _stats(broker.http, 60)["history"]["send"]
    assert min(s["ts"] for s in sends if s["count"]) >= int(start_at)


def test_heatmap_show_draws_a_running_brokers_last_seconds(cluster_factory, capsys):
    from console.cli import main

    cluster = cluster_factory(1)
    entry = cluster.file.brokers[0]
    with Producer(cluster.file.addrs, fuse=False) as producer:
        for _ in range(50):
            producer.send("t", b"x")
    deadline = time.monotonic() + 5
    while _stats(entry.http)["totals"]["messages_in"] < 50:  # its seconds closed
        assert time.monotonic() < deadline
        time.sleep(0.2)
    argv = ["heatmap", "show", "--broker", entry.name, "--cluster", str(cluster.path)]
    assert main([*argv, "--width", "60"]) == 0
    out = capsys.readouterr().out
    assert f"{entry.name} send, last 300 s:" in out and "50 values" in out
    assert main([*argv, "--op", "nope"]) == 2
    assert "--op nope: broker-1 records flush, pull, send" in capsys.readouterr().err
