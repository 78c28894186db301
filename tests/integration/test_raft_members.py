"""A raft group's members changed one at a time on real processes, through the commands
an operator types: `cluster up --consensus raft`, `cluster add-replica` (the new member
started by the supervisor with --raft-join, fed the leader's log from its first byte,
then voted in), `cluster remove-replica`, then the leader killed: the group of
the two old members and the new one elects a leader, acknowledges, and a consumer
reads every message acknowledged before and after."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from broker_core.cluster.cluster_file import load_cluster
from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import broker_role
from tests.integration.test_raft_cluster import acked as sent_acked
from tests.integration.test_raft_cluster import read_all
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def floodgate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def cluster_up(tmp_path):
    data = tmp_path / "c"
    up = subprocess.Popen([sys.executable, "-m", "console.cli", "cluster", "up", "--groups",
                           "1", "--replicas", "3", "--consensus", "raft", "--data", str(data),
                           "--base-port", str(free_port_range(40)), "--segment-size", "8M",
                           "--name", "members"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = data / "cluster.toml"
    try:
        wait_for(lambda: up.poll() is not None or (
            path.exists() and load_cluster(path).supervisor_pid == up.pid), 90, "cluster up")
        assert up.poll() is None, up.stdout.read()
        yield path
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(30)


def pids(path) -> dict[str, int]:
    return {b.name: int(broker_role(b.addr).get("pid") or 0) for b in load_cluster(path).brokers}


def test_a_replica_added_and_an_old_one_removed_keep_every_message(
        cluster_up):
    from broker_core.client.producer import Producer
    from broker_core.ha.routes import routes_for

    path = cluster_up
    routes = routes_for(load_cluster(path))
    try:
        routes.wait()
        acked = sent_acked(routes, "orders", "m", 2000)
        assert len(acked) == 2000

        added = floodgate("cluster", "add-replica", "--cluster", str(path), "--group",
                          "group-1", "--json")
        assert added.returncode == 0, added.stderr
        answer = json.loads(added.stdout)
        assert [m.split("=")[0] for m in answer["members"]] == [
            "group-1-a", "group-1-b", "group-1-c", "group-1-d"]
        leader = routes.records["group-1"].master
        held = broker_role(load_cluster(path).broker(leader).addr)
        # caught up with the leader's log (its bytes, streamed once)
        assert 2000 * 100 < answer["snapshot_bytes"] <= held["offset"]
        assert load_cluster(path).broker("group-1-d").joined

        victim = next(n for n in ("group-1-a", "group-1-b", "group-1-c") if n != leader)
        removed = floodgate("cluster", "remove-replica", "--cluster", str(path), "--group",
                            "group-1", "--member", victim)
        assert removed.returncode == 0, removed.stderr
        assert f"{victim} removed" in removed.stdout
        spec = load_cluster(path)
        assert victim not in {b.name for b in spec.brokers}
        doc = broker_role(spec.broker(leader).addr)
        assert doc.get("role") == "MASTER"

        # the old leader killed: the two left of the first three and the new member agree
        routes.close()
        routes = routes_for(load_cluster(path))
        routes.wait()
        pid = pids(path)[leader]
        assert pid > 0
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: routes.records["group-1"].master not in (leader, None), 15,
                 "a new leader")
        with Producer(routes=routes, fuse=False) as producer:
            deadline = time.monotonic() + 20
            for i in range(2000, 2500):
                while time.monotonic() < deadline:
                    if producer.send("orders", f"m{i}".encode()).status == "SEND_OK":
                        acked.add(f"m{i}".encode())
                        break
        assert len(acked) == 2500, "the group of three (one of them new) kept acknowledging"
        assert read_all(routes, "readers", "orders", acked) >= acked
    finally:
        routes.close()


def test_a_change_the_group_cannot_take_is_refused_in_one_line(cluster_up):
    path = cluster_up
    out = floodgate("cluster", "remove-replica", "--cluster", str(path), "--group", "group-1",
                    "--member", "group-1-a")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert "a group of 2 cannot lose one" in out.stderr
    bad = floodgate("cluster", "add-replica", "--cluster", str(path), "--group", "group-9")
    assert bad.returncode != 0 and "group-9" in bad.stderr



def test_a_joined_member_killed_comes_back_a_voter_and_can_lead_with_every_message(tmp_path):
    """The member added (started with --raft-join) is SIGKILLed and
    started again with the same flags: its store says it votes (its flags do not), it
    follows, and once it leads a new reader gets every message sent before it joined."""
    from broker_core.client import admin
    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.members import next_member, raft_member_flag
    from broker_core.ha.routes import routes_for

    cluster = Cluster(0, free_port_range(40), tmp_path / "k", segment_size="8M",
                      name="killjoin", groups=1, replicas=3, consensus="raft")
    cluster.up(timeout=60)
    routes = routes_for(cluster.file)
    try:
        routes.wait()
        acked = sent_acked(routes, "bulk", "j", 3000)
        assert len(acked) == 3000
        entry = next_member(cluster.file, "group-1")
        cluster.file.brokers.append(entry)
        cluster.start_broker(entry)
        leader = cluster.file.broker(routes.records["group-1"].master)
        doc = admin.members(leader.http, {"add": raft_member_flag(entry)})
        assert doc["members"][-1] == raft_member_flag(entry) and doc["snapshot_bytes"] > 0
        cluster.procs[entry.name].kill()
        cluster.procs[entry.name].wait()
        cluster.start_broker(entry)  # --raft-join again: its store knows better
        wait_for(lambda: broker_role(entry.addr).get("role") == "SLAVE", 30,
                 "the new member following again")

        def leads() -> bool:  # as an operator would: again while it was not caught up yet
            if broker_role(entry.addr).get("role") == "MASTER":
                return True
            # asked of whoever leads now: a transfer's campaign that lost, or an election
            # on a loaded host, moves leadership, and a former leader refuses to transfer
            now = next((b for b in cluster.file.brokers
                        if broker_role(b.addr).get("role") == "MASTER"), None)
            if now is not None:
                with contextlib.suppress(admin.AdminError):
                    admin.transfer_leader(now.http, entry.name)
            return False

        wait_for(leads, 30, "the new member leading", every=0.5)
        routes.close()
        routes = routes_for(cluster.file)
        routes.wait()
        assert read_all(routes, "readers", "bulk", acked) >= acked
    finally:
        routes.close()
        cluster.down(grace=5.0)


def queue_floor(addr: str, topic: str, queue_id: int) -> int:
    """The first offset of a queue a reader finds on the broker at `addr`."""
    from broker_core.client.connection import Connection
    from broker_core.protocol import Op, decode_json, encode_json

    conn = Connection(addr)
    try:
        _code, body = conn.call(Op.QUERY_OFFSET, encode_json(
            {"group": "floor", "topic": topic, "queue_id": queue_id}), 5.0)
        return int(decode_json(body)["min_offset"])
    finally:
        conn.close()


def test_members_begun_after_retention_start_at_the_leaders_first_byte(tmp_path):
    """Retention removed the leader's first segment. An empty member is fed from the
    leader's first byte: one whose store an operator emptied and started again with the
    members of its first start (its flags predate group-1-d), which takes the
    configuration in force at that byte (retention removed its record), and one added
    then (group-1-e). Once the new member leads, a reader finds the queue beginning where the
    leader's did, and every message acknowledged past it."""
    import shutil
    from dataclasses import replace

    from broker_core.client import admin
    from broker_core.client.producer import Producer
    from broker_core.cluster.launcher import Cluster
    from broker_core.cluster.members import next_member, raft_member_flag
    from broker_core.ha.routes import routes_for

    cluster = Cluster(0, free_port_range(40), tmp_path / "r", segment_size="8M",
                      name="retained", groups=1, replicas=3, consensus="raft",
                      extra_args=["--retention-hours", "0.0005"])
    cluster.up(timeout=60)
    routes = routes_for(cluster.file)
    pad = b"x" * 4000

    def add_member():
        entry = next_member(cluster.file, "group-1")
        cluster.file.brokers.append(entry)
        cluster.start_broker(entry)
        leader = cluster.file.broker(routes.records["group-1"].master)
        doc = admin.members(leader.http, {"add": raft_member_flag(entry)})
        assert doc["members"][-1] == raft_member_flag(entry)
        return entry

    try:
        routes.wait()
        first_four = add_member()  # group-1-d: its configuration's record will go
        with Producer(routes=routes, fuse=False) as producer:
            sent = [b"%d-" % i + pad for i in range(3000)]  # 12 MB: two segments
            results = [producer.send("bulk", body, order_key="one queue") for body in sent]
        acked = [body for body, r in zip(sent, results, strict=True) if r.status == "SEND_OK"]
        qid = results[0].queue_id
        assert len(acked) == 3000 and {r.queue_id for r in results} == {qid}
        leader = cluster.file.broker(routes.records["group-1"].master)
        wait_for(lambda: queue_floor(leader.addr, "bulk", qid) > 0, 30,
                 "retention removed the leader's first segment", every=0.5)
        floor = queue_floor(leader.addr, "bulk", qid)

        emptied = next(b for b in cluster.file.brokers[:3] if b.name != leader.name)
        cluster.procs[emptied.name].kill()
        cluster.procs[emptied.name].wait()
        shutil.rmtree(emptied.data)
        four = cluster.file.brokers
        cluster.file.brokers = [b for b in four if b is not first_four]
        cluster.start_broker(replace(emptied))  # the members of its first start
        cluster.file.brokers = four
        wait_for(lambda: broker_role(emptied.addr).get("voters") == sorted(
            b.name for b in four), 30, "the emptied member taking the configuration in force")

        new = add_member()  # group-1-e, empty
        wait_for(lambda: broker_role(new.addr).get("role") == "SLAVE", 30,
                 "the new member following")
        admin.transfer_leader(leader.http, new.name)
        wait_for(lambda: broker_role(new.addr).get("role") == "MASTER", 30,
                 "the new member leading")
        assert queue_floor(new.addr, "bulk", qid) == floor
        assert queue_floor(emptied.addr, "bulk", qid) == floor
        routes.close()
        routes = routes_for(cluster.file)
        routes.wait()
        kept = set(acked[floor:])
        assert read_all(routes, "readers", "bulk", kept) >= kept
    finally:
        routes.close()
        cluster.down(grace=5.0)
