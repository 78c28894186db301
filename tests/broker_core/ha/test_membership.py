"""A broker's registration in ZooKeeper (ha.membership) against a real ZooKeeper."""

import asyncio
import json
import time

import pytest

from broker_core.ha.membership import HANDOVER_S, Membership
from broker_core.ha.records import Paths
from tests.broker_core.ha.conftest import member

pytestmark = pytest.mark.timeout(60)


def test_a_fast_restart_registers_only_a_handover_after_its_old_session_ends(
        tmp_path, zookeeper, zk_root):
    """The old process's node still up (its session not yet expired) blocks the name;
    once it goes, the new registration waits HANDOVER_S, so a controller sees the
    broker gone before it is back (registered 0.1 s after, a restarted master was
    taken as never gone and its slave not promoted)."""
    from kazoo.client import KazooClient

    cluster = zk_root.strip("/").replace("/", "_")
    path = Paths(cluster).broker("g", "a")
    old = KazooClient(hosts=zookeeper.addr, timeout=5.0)  # the killed process's session
    old.start(timeout=10)
    old.create(path, b'{"pid": 1}', ephemeral=True, makepath=True)

    async def main():
        m = await member(tmp_path, "a", "async")
        membership = Membership(m.node, zookeeper.addr, cluster, session_s=2.0)
        registering = asyncio.ensure_future(membership.start())
        try:
            await asyncio.sleep(0.5)
            assert not registering.done()  # blocked by the old session's node
            # the node goes as the session's end takes it, by a delete: its time is known
            # within the delete's round trip (a session's stop took over a second under
            # load, the node gone early in it, and the wait read as 8 ms)
            going = time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, old.delete, path)
            await asyncio.wait_for(registering, 20)
            waited = time.monotonic() - going
            data, _stat = membership.zk.get(path)
            return waited, json.loads(data)
        finally:
            registering.cancel()
            await membership.close()
            await m.close()

    try:
        waited, registration = asyncio.run(main())
    finally:
        old.stop()
        old.close()
    assert waited >= HANDOVER_S
    assert registration["name"] == "a" and registration["pid"] != 1


def test_a_closed_membership_records_nothing_and_logs_a_clean_leave(
        tmp_path, zookeeper, zk_root, caplog):
    """A master stopping while its in-sync loop drops the slave (stopping too) wrote to a
    closed session: a traceback in every stopped demo's log, and a session "lost"."""
    import logging

    cluster = zk_root.strip("/").replace("/", "_")

    async def main():
        m = await member(tmp_path, "a", "async")
        membership = Membership(m.node, zookeeper.addr, cluster, session_s=2.0)
        try:
            await membership.start()
        finally:
            await membership.close()
            await m.close()
        return await membership.persist_isr(frozenset({"b"}))

    caplog.set_level(logging.INFO, logger="floodgate.ha")
    assert asyncio.run(main()) is False  # nothing recorded, nothing raised
    assert "session lost" not in caplog.text
