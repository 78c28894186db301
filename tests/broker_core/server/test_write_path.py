"""Admission on the write path: SYSTEM_BUSY at once when writes back up
(too many in flight, or the oldest not yet stored waiting too long), never
queueing; a stored write waiting for its slaves is in flight, not queued."""

import asyncio

import pytest

from broker_core.protocol import Code
from broker_core.server.faults import Faults, FaultSpec
from broker_core.server.write_path import WritePath
from broker_core.store import MessageStore, PutStatus


@pytest.fixture
def store(tmp_path, small_config):
    s = MessageStore(tmp_path / "store", small_config())
    yield s
    s.close()


def path(store, max_inflight=2, busy_after_ms=200.0):
    return WritePath(store, Faults(lambda: 0.0), sync_flush=False,
                     busy_after_ms=busy_after_ms, max_inflight=max_inflight)


def put(store):
    return lambda: store.put("t", 0, b"x", wait=False)


async def write(wp, put):
    """(code, result) of a write, now or once it is done."""
    fut = asyncio.get_running_loop().create_future()
    out = wp.write(put, lambda code, result: fut.set_result((code, result)))
    return out if out is not None else await fut


def test_idle_path_writes_directly(store):
    wp = path(store)
    assert wp.refusal(0.0) is None
    code, result = wp.write(put(store), None)  # answered at once: no callback needed
    assert code == Code.OK and result.status is PutStatus.PUT_OK
    assert wp.inflight == 0


def test_refuses_once_max_inflight_writes_wait(store):
    wp = path(store, max_inflight=2)
    wp.faults.inject(FaultSpec(latency_ms=50))  # holds each write in flight

    async def run():
        slow = [asyncio.create_task(write(wp, put(store))) for _ in range(2)]
        await asyncio.sleep(0.01)
        assert wp.inflight == 2
        refused = await write(wp, put(store))
        return refused, await asyncio.gather(*slow)

    (code, reason), done = asyncio.run(run())
    assert code == Code.SYSTEM_BUSY and "2 writes in flight" in reason
    assert [c for c, _ in done] == [Code.OK, Code.OK]
    assert wp.busy_refusals == 1 and wp.inflight == 0


def test_refuses_when_the_oldest_write_waited_too_long(store):
    wp = path(store, max_inflight=100, busy_after_ms=200.0)
    wp._queued[object()] = 10.0  # one write waiting to be stored since t = 10 s
    assert wp.refusal(10.1) is None
    assert "the oldest for 250 ms" in wp.refusal(10.25)


def test_a_write_waiting_for_its_slave_is_in_flight_but_never_too_old(store):
    """Stored and parked on the slaves' acks: the slaves' timeout answers it
    (FLUSH_SLAVE_TIMEOUT), not SYSTEM_BUSY for the sends behind it."""
    from broker_core.ha.epochs import EpochHistory
    from broker_core.ha.master import ReplicationMaster

    wp = path(store, max_inflight=2, busy_after_ms=200.0)
    master = ReplicationMaster(store, "g", sync=True, timeout_s=60.0, epoch=lambda: 1,
                               history=EpochHistory, is_master=lambda: True, meta=dict)
    master.in_sync.add("slave")  # in sync, and silent: nothing is ever acked
    wp.replication = master
    answered = []
    assert wp.write(put(store), lambda *a: answered.append(a)) is None  # parked
    assert wp.inflight == 1 and wp.refusal(1e9) is None  # however long it waits
    assert wp.write(put(store), lambda *a: answered.append(a)) is None
    code, reason = wp.write(put(store), None)  # the in-flight bound still holds
    assert code == Code.SYSTEM_BUSY and "2 writes in flight" in reason
    master.acked["slave"] = store.commitlog.write_offset
    master._release()
    assert [c for c, _ in answered] == [Code.OK, Code.OK] and wp.inflight == 0


def test_injected_error_is_answered_and_releases_its_slot(store):
    wp = path(store)
    wp.faults.inject(FaultSpec(error_rate=1.0))
    assert asyncio.run(write(wp, put(store))) == (Code.SYSTEM_ERROR, "injected error")
    assert wp.inflight == 0
