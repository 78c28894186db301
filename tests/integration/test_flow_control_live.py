"""Flow control end to end: quotas set with `floodgate quota` on real brokers, a
flooding producer group backing off by the brokers' hints, the fuse never
isolating a broker for protecting its capacity."""

import json
import time

import pytest

from broker_core.client import admin
from broker_core.client.producer import Producer, SendFailed
from capacity.quotas import plan_quotas
from console.cli import main

pytestmark = pytest.mark.integration


def floodgate(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_quota_commands_and_a_throttled_group_that_backs_off(cluster_factory, capsys, tmp_path):
    cluster = cluster_factory(2)
    path = str(cluster.path)
    code, _out, err = floodgate(capsys, "quota", "set", "--cluster", path, "--topic", "a[b",
                                "--rate", "5")
    assert code == 2 and err.count("\n") == 1 and "unknown topic pattern" in err
    http = cluster.file.brokers[0].http  # the admin API refuses what the command would not
    for body, words in (({"target": "t", "rate": -1}, "rate must be a positive"),
                        ({"target": "t", "rate": 1, "colour": "red"}, "unknown quota fields"),
                        ([1, 2], "must be a JSON object")):
        with pytest.raises(admin.AdminError, match=words):
            admin.quota(http, "POST", body)
    code, out, _ = floodgate(capsys, "quota", "set", "--cluster", path, "--group", "flood",
                             "--rate", "200", "--burst", "20")
    assert code == 0 and out.count("group flood") == 2  # both brokers

    with Producer(cluster.file.addrs, group="flood") as flood, \
            Producer(cluster.file.addrs, group="calm") as calm:
        t0 = time.monotonic()
        results = [flood.send("orders", b"x") for _ in range(100)]
        took = time.monotonic() - t0
        calm_results = [calm.send("orders", b"y") for _ in range(100)]
        assert all(r.status == "SEND_OK" for r in results + calm_results)
        # 2 brokers x (20 at once + 200/s): 100 sends cannot all pass in under 0.15 s
        assert took >= 0.15
        flow = flood.counters.snapshot()
        assert flow["flow_control"] > 0 and flow["flow_control_gave_up"] == 0
        assert calm.counters.snapshot()["flow_control"] == 0
        snap = flood.fuse.snapshot()
        assert not snap.isolated and not any(snap.isolations_by_broker.values())
        # out of retries: the send fails as FLOW_CONTROL, still no isolation
        strict = Producer(cluster.file.addrs, group="flood", flow_retries=0)
        with strict, pytest.raises(SendFailed, match="FLOW_CONTROL"):
            for _ in range(200):
                strict.send("orders", b"z")
        assert not strict.fuse.snapshot().isolated

    code, out, _ = floodgate(capsys, "quota", "show", "--cluster", path, "--json")
    shown = json.loads(out)
    assert code == 0 and set(shown) == {"broker-1", "broker-2"}
    assert sum(d["throttled_total"] for d in shown.values()) >= flow["flow_control"]
    code, out, _ = floodgate(capsys, "quota", "clear", "--cluster", path, "--group", "flood")
    assert code == 0 and out.count("removed 1") == 2
    # rough edge 9: a name that matches nothing is not a success
    code, out, err = floodgate(capsys, "quota", "clear", "--cluster", path, "--topic", "nosuch")
    assert code == 1 and "no quota on topic 'nosuch' on any broker" in err

    plan = tmp_path / "capacity.json"
    plan.write_text(json.dumps({"quotas": {"fuse_reserve": 0.3, "topics": [
        q.to_dict() for q in plan_quotas(1000, {"orders": 0.5}, headroom=0.2)]}}))
    code, out, _ = floodgate(capsys, "quota", "apply", "--cluster", path, "--plan", str(plan))
    assert code == 0 and "topic orders: 300 msgs/s per broker" in out
    code, out, _ = floodgate(capsys, "quota", "show", "--cluster", path, "--json")
    assert [q["rate"] for d in json.loads(out).values() for q in d["quotas"]] == [300.0, 300.0]
    bad = tmp_path / "not-a-plan.json"
    bad.write_text("{}")
    code, _out, err = floodgate(capsys, "quota", "apply", "--cluster", path, "--plan", str(bad))
    assert code == 2 and "no quotas in it" in err


def test_the_asyncio_producer_backs_off_and_is_counted(cluster_factory):
    import asyncio

    from broker_core.client.aio_producer import AsyncProducer

    cluster = cluster_factory(1)
    admin.quota(cluster.file.brokers[0].http, "POST",
                {"kind": "topic", "target": "orders", "rate": 250, "burst": 10})

    async def flood() -> tuple[list, dict, object]:
        async with AsyncProducer(cluster.file.addrs, group="app", flow_retries=10) as p:
            sends = []
            for i in range(60):  # a few a turn of the loop: each turn's ride one frame,
                sends.append(asyncio.ensure_future(p.send("orders", b"x")))  # admitted whole
                if i % 4 == 3:
                    await asyncio.sleep(0)
            results = await asyncio.gather(*sends)
            return results, p.counters.snapshot(), p.fuse.snapshot()

    results, counters, fuse = asyncio.run(flood())
    assert all(r.status == "SEND_OK" for r in results)
    assert counters["flow_control"] > 0 and counters["backoff_s"] > 0
    assert not fuse.isolated
