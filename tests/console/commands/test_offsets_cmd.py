"""`floodgate offsets` on a live broker: show, a dry run that writes nothing, a reset by
time with the group's consumer online (it goes on from the new offsets: the newer
messages come again, none older, and nothing of the old range is committed after),
skipping the backlog, and bad input one line each, exit 2."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from broker_core.client.connection import Connection
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer
from broker_core.cluster.ports import free_port_range
from broker_core.protocol import Op, decode_json, encode_json
from console.cli import main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from broker_core.cluster.launcher import Cluster

    c = Cluster(1, free_port_range(2), tmp_path_factory.mktemp("offsets"))
    c.up()
    yield c
    c.down(grace=3)


def offsets(cluster, *args: str) -> int:
    try:
        return main(["offsets", args[0], "--cluster", str(cluster.path), *args[1:]])
    except SystemExit as exc:  # refused by the parser (a flag's value)
        return int(exc.code)


class Online:
    """A consumer of the group polling and committing on a thread, as in production."""

    def __init__(self, cluster, group: str, topic: str) -> None:
        self.consumer = Consumer(group, topic, cluster.file.addrs)
        self.got: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            msgs = self.consumer.poll(64, timeout=0.1)
            self.got += [m.body for m in msgs]
            self.consumer.commit()

    def wait_for(self, n: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.got) >= n, (len(self.got), n)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def test_show_dry_run_and_a_reset_by_time_with_the_consumer_online(cluster, capsys):
    with Producer(cluster.file.addrs) as p:
        for i in range(40):
            p.send("ledger", b"old-%d" % i)
        time.sleep(0.05)
        middle = datetime.now(UTC)
        time.sleep(0.05)
        for i in range(40):
            p.send("ledger", b"new-%d" % i)
    online = Online(cluster, "audit", "ledger")
    try:
        online.wait_for(80)
        time.sleep(0.3)  # its last commit
        assert offsets(cluster, "show", "--group", "audit") == 0
        out = capsys.readouterr().out
        assert "total lag 0 over 4 queue(s)" in out
        at = middle.isoformat()
        assert offsets(cluster, "reset", "--group", "audit", "--topic", "ledger",
                       "--to-time", at, "--dry-run") == 0
        out = capsys.readouterr().out
        assert "dry run: nothing written" in out
        replayed = sum(int(line.split()[-2].replace(",", "")) for line in out.splitlines()
                       if line.endswith("replayed"))
        assert replayed == 40
        # nothing written: every broker still answers the group's heartbeats with no reset
        # (how a consumer hears of one), so the consumer reads on where it was
        for addr in cluster.file.addrs.values():
            conn = Connection(addr)
            try:
                _code, body = conn.call(Op.HEARTBEAT, encode_json(
                    {"client_id": "a-look", "group": "audit", "topic": "ledger",
                     "leave": True}), 5.0)
            finally:
                conn.close()
            assert decode_json(body)["reset"] == 0
        assert len(online.got) == 80
        assert offsets(cluster, "reset", "--group", "audit", "--topic", "ledger",
                       "--to-time", at) == 0
        assert "written on broker-1" in capsys.readouterr().out
        online.wait_for(120)
        time.sleep(0.5)
        again = online.got[80:]
        assert sorted(again) == sorted(b"new-%d" % i for i in range(40))  # none older
        assert online.consumer.resets_seen == 1
    finally:
        online.close()
    assert offsets(cluster, "show", "--group", "audit", "--topic", "ledger") == 0
    assert "total lag 0 over 4 queue(s)" in capsys.readouterr().out


def test_to_latest_skips_the_backlog(cluster, capsys):
    with Producer(cluster.file.addrs) as p:
        for i in range(8):
            p.send("skip", b"s%d" % i)
    with Consumer("late", "skip", cluster.file.addrs) as c:
        got = []
        while len(got) < 8:
            got += c.poll(64, timeout=0.5)
        c.commit()
    with Producer(cluster.file.addrs) as p:
        for i in range(12):
            p.send("skip", b"backlog-%d" % i)
    assert offsets(cluster, "reset", "--group", "late", "--topic", "skip",
                   "--to-latest") == 0
    out = capsys.readouterr().out
    skipped = sum(int(line.split()[-2].replace(",", "")) for line in out.splitlines()
                  if line.endswith("skipped"))
    assert skipped == 12
    assert offsets(cluster, "show", "--group", "late") == 0
    assert "total lag 0" in capsys.readouterr().out


@pytest.fixture(scope="module")
def journal(cluster):
    """A topic of its own with a committed group, so the bad-input cases run alone too."""
    with Producer(cluster.file.addrs) as p:
        for i in range(4):
            p.send("journal", b"entry-%d" % i)
    clerk = Consumer("clerk", "journal", cluster.file.addrs)
    try:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < deadline:
            got += clerk.poll(16, timeout=0.1)
        clerk.commit()
    finally:
        clerk.close()
    assert len(got) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["show", "--group", "nobody"], "group 'nobody' has no offsets on any broker"),
    (["show", "--group", ""], "illegal consumer group name ''"),
    (["reset", "--group", "a b", "--topic", "journal", "--to-earliest"],
     "illegal consumer group name 'a b'"),
    (["reset", "--group", "clerk", "--topic", "journal", "--to-time", "2999-01-01T00:00:00"],
     "is in the future"),
    (["reset", "--group", "clerk", "--topic", "journal", "--to-time", "yesterday"],
     "is not an ISO 8601 time"),
    (["reset", "--group", "clerk", "--topic", "journal", "--by", "1000000"],
     "outside what it holds"),
    (["reset", "--group", "clerk", "--topic", "journal", "--by", "0"], "--by 0 moves nothing"),
    (["reset", "--group", "nobody", "--topic", "journal", "--to-earliest"],
     "has no offsets in journal"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(cluster, journal, capsys, args, message):
    assert offsets(cluster, *args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_broadcast_group_shows_each_instance_and_refuses_a_reset(cluster, capsys, tmp_path):
    with Producer(cluster.file.addrs) as p:
        for i in range(10):
            p.send("fanout", b"f%d" % i)
    instances = [Consumer("cache", "fanout", cluster.file.addrs, client_id=f"host-{x}",
                          broadcast=True, offsets_file=tmp_path / f"{x}.json") for x in "ab"]
    got = []
    while len(got) < 10:
        got += instances[0].poll(64, timeout=0.5)
    assert len(instances[1].poll(3, timeout=5)) == 3  # host-b: 7 behind
    for c in instances:
        c.commit()
        c.heartbeat()  # where each instance is, told to the broker
    try:
        assert offsets(cluster, "show", "--group", "cache") == 0
        out = capsys.readouterr().out
        assert "broadcast mode" in out
        assert "lag per instance: host-a 0, host-b 7" in out
        assert offsets(cluster, "reset", "--group", "cache", "--topic", "fanout",
                       "--to-earliest") == 2
        err = capsys.readouterr().err
        assert "consumes in broadcast mode" in err and err.count("\n") == 1
    finally:
        for c in instances:
            c.close()



def test_a_slaves_copy_counts_only_while_its_group_has_no_other_answer():
    from console.data.replicas import slave_copies

    answered = [("g1-a", "g1", False), ("g1-b", "g1", True),  # both answered
                ("g2-b", "g2", True),  # its master down, not yet replaced
                ("single", "single", False)]  # fmt: skip
    assert slave_copies(answered) == {"g1-b"}


@pytest.mark.parametrize(("body", "message"), [
    ({"group": "clerk", "topic": "journal", "to": "earliest"}, "epoch is missing: the reset's"),
    ({"group": "clerk", "topic": "journal", "to": "earliest", "epoch": "now"},
     "epoch must be a positive whole number (ms), not 'now'"),
])  # fmt: skip
def test_the_admin_endpoint_says_what_a_reset_without_its_epoch_lacks(cluster, journal, body,
                                                                       message):
    """An operator's curl to /admin/offsets, not the command (which always sends one)."""
    import json
    import urllib.error
    import urllib.request

    http = cluster.file.brokers[0].http
    before = json.load(urllib.request.urlopen(f"http://{http}/admin/offsets?group=clerk"))
    req = urllib.request.Request(f"http://{http}/admin/offsets", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    assert refused.value.code == 400 and message in refused.value.read().decode()
    after = json.load(urllib.request.urlopen(f"http://{http}/admin/offsets?group=clerk"))
    assert after == before  # nothing written
