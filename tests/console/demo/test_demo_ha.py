"""The replicated demo (`make demo` = `floodgate demo --groups 4`): masters only get
the load, act 3's kill hands group-1 to its slave and the supervisor brings the
killed broker back as the new slave, with the load going on and group-1 back in the
producer's routing once that slave is in sync."""

from __future__ import annotations

import time

import pytest

from broker_core.cluster.ports import free_port_range
from broker_core.cluster.roles import broker_role
from broker_core.cluster.zookeeper import available as zk_missing
from broker_core.observe.events import read_events
from console.demo.runner import Demo, DemoOptions
from console.demo.script import KILL, REWIND
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(zk_missing()), reason=zk_missing() or "")]


def test_replicated_demo_kill_act(tmp_path):
    # four groups, as `make demo` runs: the fuse's cap is 1, so the isolated group gets no
    # sends. With two (cap 0) it served as overflow, and a slow or busy answer from the new
    # master on a loaded host held it for its minute (an isolation of mixed causes, as the
    # fuse rules): this test failed once in five CI runs, most likely that way
    demo = Demo(DemoOptions(rate=300, faults=False, data=tmp_path / "demo",
                            base_port=free_port_range(3 * 2 * 4 + 2), groups=4,
                            clients=False)).start()
    try:
        old = demo.routes.records["group-1"]
        acked = wait_for(lambda: demo.load_totals()["acked"], 10, "the load acknowledged")
        demo.fault_player.fault(1, REWIND)  # act 3's offset reset: on every broker, no broker hit
        rewind = demo.actions[-1]
        assert (rewind.kind, rewind.broker, rewind.node) == ("rewind", "warehouse", "")
        assert rewind.action.startswith("offsets of group warehouse reset 30 s back: 0 messages")
        demo.fault_player.fault(1, KILL)
        assert demo.actions[-1].kind == "kill" and demo.actions[-1].broker == "group-1"
        deadline = time.monotonic() + 30
        while True:
            rec = demo.routes.records["group-1"]
            back = broker_role(demo.cluster.file.broker(old.master).addr)
            if rec.epoch > old.epoch and back.get("role") == "SLAVE":
                break
            assert time.monotonic() < deadline, (rec, back)
            time.sleep(0.2)
        assert rec.master != old.master
        # the post-mortem's timeline: the reset and the kill as the demo did them, and the
        # failover as the controller made it, after the kill
        logged = {e["kind"]: e for e in read_events(demo.data_dir)}
        assert logged["offsets"]["text"] == rewind.action
        kill = next(e for e in read_events(demo.data_dir) if e.get("action") == "kill")
        failover = logged["failover"]
        assert (failover["source"], failover["old_master"], failover["new_master"]) == (
            "controller", old.master, rec.master)
        assert kill["time"] <= failover["time"] <= kill["time"] + 30
        new = demo.cluster.file.broker(rec.master).addr
        before = broker_role(new)["offset"]
        # the load follows group-1 to its new master
        wait_for(lambda: broker_role(new)["offset"] > before, 10, "sends to the new master")
        totals = demo.load_totals()
        # retries land on the other group; on a host this test shares (load 12 seen) a
        # few sends still fail SYSTEM_BUSY behind slow acks: not what this test is about
        assert totals["acked"] > acked and totals["errors"] <= 0.05 * totals["acked"], totals
        # the new master answered one copy only until the killed broker was back in sync:
        # the fuse lets group-1 back then (release in-sync), not after its minute
        try:
            wait_for(lambda: "group-1" not in {i["broker"] for i in
                                               demo.fuse_snapshot().get("isolated", [])},
                     15, "group-1 back in routing once its slave is in sync")
        except AssertionError as exc:  # say what the fuse held against it, and the load's
            fuse = demo.fuse_snapshot()
            raise AssertionError(f"{exc}; isolated {fuse.get('isolated')}; transitions "
                                 f"{fuse.get('transitions')}; load {demo.load_totals()}") \
                from None
    finally:
        demo.stop()
