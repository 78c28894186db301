"""Master/slave replication between real brokers (store, TCP, HA link) on one loop:
sync sends are answered once the slave holds them, logs are byte-identical, a
slave from empty catches up, a diverged old master cuts its tail."""

import asyncio

import pytest

from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.attempts import SendFailed
from broker_core.protocol import Code
from tests.broker_core.ha.conftest import frozen_pair, log_bytes, member
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)  # a hang fails in a minute, not five



async def produce(addr, n, size=300, topic="orders"):
    async with AsyncProducer([addr], fuse=False, timeout=5.0, retries=0) as p:
        return await asyncio.gather(*(p.send(topic, bytes([i % 256]) * (size + i % 50),
                                             tags=f"t{i % 3}") for i in range(n)))


async def pair(tmp_path, replication="sync", **kw):
    m = await member(tmp_path, "m", replication, **kw)
    s = await member(tmp_path, "s", replication, **kw)
    await m.node.become_master(1, frozenset({"m"}))
    await s.node.become_slave(m.info(1), m.addr)
    await until(lambda: "s" in m.node.master.in_sync)
    return m, s


def test_sync_send_answers_once_the_slave_holds_it(tmp_path):
    async def main():
        m, s = await pair(tmp_path)
        try:
            results = await produce(m.addr, 1500)
            assert {r.status for r in results} == {"SEND_OK"}
            # every acked send was on the slave when it was answered: nothing to wait for
            assert s.broker.store.commitlog.write_offset == m.broker.store.commitlog.write_offset
            assert len(m.broker.store.commitlog.segments) > 3  # rolls replicated too
            assert log_bytes(s.broker) == log_bytes(m.broker)
            for q in m.broker.store.queues():
                got = s.broker.store.get(*q, 0, 2000).messages
                want = m.broker.store.get(*q, 0, 2000).messages
                assert [(x.queue_offset, x.body, x.tags) for x in got] == \
                       [(x.queue_offset, x.body, x.tags) for x in want]
            await until(lambda: s.broker.topics.queues.get("orders") == 4)  # META
            lag = m.node.figures()["slaves"][0]
            assert lag["lag_bytes"] == 0 and lag["in_sync"]
        finally:
            await s.close()
            await m.close()

    asyncio.run(main())


def test_slave_refuses_sends_naming_its_master(tmp_path):
    async def main():
        m, s = await pair(tmp_path)
        try:
            with pytest.raises(SendFailed) as err:
                await produce(s.addr, 1)
            assert err.value.code == Code.NOT_MASTER and "master is m" in str(err.value)
        finally:
            await s.close()
            await m.close()

    asyncio.run(main())


def test_no_slave_in_sync_answers_slave_not_available(tmp_path):
    async def main():
        m, s = await pair(tmp_path)
        try:
            await s.close()  # the slave goes: the master records it out of the set
            await until(lambda: not m.node.master.in_sync)
            results = await produce(m.addr, 20)
            assert {r.status for r in results} == {"SLAVE_NOT_AVAILABLE"}
            assert m.broker.store.get("orders", 0, 0).messages  # stored all the same
        finally:
            await m.close()

    asyncio.run(main())


def test_slave_restarted_from_empty_catches_up_byte_identically(tmp_path):
    async def main():
        m, s = await pair(tmp_path)
        try:
            await produce(m.addr, 800)
            await s.close()
            fresh = await member(tmp_path / "fresh", "s")  # same name, empty data dir
            await fresh.node.become_slave(m.info(1), m.addr)
            await until(lambda: fresh.broker.store.commitlog.write_offset
                        == m.broker.store.commitlog.write_offset)
            assert log_bytes(fresh.broker) == log_bytes(m.broker)
            assert fresh.node.epochs.history.entries == [(1, 0)]
            await fresh.close()
        finally:
            await m.close()

    asyncio.run(main())


def test_old_master_becomes_slave_and_cuts_what_the_new_one_never_had(tmp_path):
    async def main():
        a, b = await pair(tmp_path, replication="async")
        try:
            await produce(a.addr, 300)
            await until(lambda: b.broker.store.commitlog.write_offset
                        == a.broker.store.commitlog.write_offset)
            agreed = b.broker.store.commitlog.write_offset
            await b.node.become_master(2, frozenset({"b"}))  # a is cut off meanwhile ...
            for i in range(40):  # ... and still writes as master of epoch 1
                assert a.broker.store.put("orders", 0, b"lost %d" % i).ok
            assert a.broker.store.commitlog.write_offset > agreed
            await produce(b.addr, 50)
            await a.node.become_slave(b.info(2), b.addr)  # it learns of epoch 2
            await until(lambda: a.broker.store.commitlog.write_offset
                        == b.broker.store.commitlog.write_offset)
            assert log_bytes(a.broker) == log_bytes(b.broker)
            cuts = [e for e in a.node.events if e["kind"] == "truncated"]
            assert cuts and cuts[0]["bytes"] > 0 and f"at {agreed}" in cuts[0]["detail"]
            assert not any(m.body.startswith(b"lost") for m in
                           a.broker.store.get("orders", 0, 0, 1000).messages)
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_lag_and_roles_on_stats_and_metrics(tmp_path):
    from prometheus_client import generate_latest

    from broker_core.observe.prometheus import broker_registry
    from broker_core.observe.snapshot import take_snapshot
    from broker_core.observe.stats_doc import BrokerStats

    async def main():
        m, s = await pair(tmp_path)
        try:
            await produce(m.addr, 50)
            doc = m.broker.stats(0)["ha"]
            assert doc["role"] == "MASTER" and doc["epoch"] == 1 and doc["in_sync"] == ["s"]
            assert doc["unconfirmed_msgs"] == 0  # every send acked: every message readable
            assert doc["slaves"][0]["name"] == "s" and doc["slaves"][0]["lag_bytes"] == 0
            assert s.broker.stats(0)["ha"]["following"]["master"] == "m"
            typed = BrokerStats.from_dict(m.broker.stats(0)).ha
            assert (typed.role, typed.epoch, typed.in_sync) == ("MASTER", 1, ("s",))
            assert typed.slaves[0].name == "s" and typed.worst_lag_bytes == 0
            assert BrokerStats.from_dict({"ha": {"group": "g", "slaves": [1, {"lag_s": "x"}],
                                                 "epoch": "nan"}}).ha.epoch is None
            text = generate_latest(broker_registry(lambda: take_snapshot(m.broker))).decode()
            assert 'floodgate_replication_lag_bytes{broker="m",group="g",slave="s"} 0.0' in text
            assert 'floodgate_ha_in_sync_slaves{broker="m",group="g"} 1.0' in text
            assert 'floodgate_ha_role{broker="m",group="g",role="MASTER"} 1.0' in text
            m.broker.store.put("orders", 0, b"unseen")  # appended, not streamed yet
            lag = m.node.master.lag(m.node.master.links["s"])
            assert lag[0] > 0
            assert m.node.figures()["unconfirmed_msgs"] == 1  # not readable yet
        finally:
            await s.close()
            await m.close()

    asyncio.run(main())


def test_unrecorded_shrink_keeps_waiting_for_the_slave(tmp_path):
    """ZooKeeper away: the master cannot record that its slave left, so the slave
    may still be promoted; sends must not be answered OK without it."""
    recorded = {"ok": True}

    async def persist(in_sync):
        return recorded["ok"]

    async def main():
        m = await member(tmp_path, "m", sync_timeout_s=0.3, persist_isr=persist)
        s = await member(tmp_path, "s")
        await m.node.become_master(1, frozenset({"m"}))
        await s.node.become_slave(m.info(1), m.addr)
        await until(lambda: "s" in m.node.master.in_sync)
        try:
            recorded["ok"] = False
            await s.close()
            results = await produce(m.addr, 5)
            assert {r.status for r in results} == {"FLUSH_SLAVE_TIMEOUT"}
            assert m.node.master.in_sync == {"s"}
            recorded["ok"] = True  # back: the shrink is recorded, then applied
            await until(lambda: not m.node.master.in_sync)
            assert {r.status for r in await produce(m.addr, 3)} == {"SLAVE_NOT_AVAILABLE"}
            # stored short of the promise: the master's own failures (it reads FAILING);
            # stored on one copy as the group now promises: the group's alert, no failure
            assert m.broker.sends.error_codes == {"FLUSH_SLAVE_TIMEOUT": 5}
            assert m.broker.sends.last_failure["code"] == "FLUSH_SLAVE_TIMEOUT"
            m.broker.recorder.roll(final=True)  # the sends' seconds closed, this one too
            assert m.broker.recorder.failures_total["send"] == 5
        finally:
            await m.close()

    asyncio.run(main())


def test_demoted_master_answers_parked_sends_unacknowledged(tmp_path):
    async def main():
        m, s = await frozen_pair(tmp_path, sync_timeout_s=5.0)
        try:
            await s.node.step_down("paused for the test")  # no acks from now on
            sends = asyncio.ensure_future(produce(m.addr, 3))
            await asyncio.sleep(0.1)
            await m.node.become_slave(s.info(2), s.addr)  # epoch 2 elsewhere
            with pytest.raises(SendFailed) as err:
                await sends
            assert err.value.code == Code.UNACKNOWLEDGED  # parked, then never acknowledged
        finally:
            await s.close()
            await m.close()

    asyncio.run(main())
