"""The replication link's batching at its edges, with real stores: a transfer that ends
inside a record is acked up to the last whole record only; one ack releases every
parked send it covers and no other; one read of many frames is acked once."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile
from broker_core.ha.master import ReplicationMaster
from broker_core.ha.master_link import SlaveLink
from broker_core.ha.slave import MasterInfo, ReplicaClient
from broker_core.protocol import Code
from broker_core.protocol.record import HEADER
from broker_core.store import MessageStore

pytestmark = pytest.mark.timeout(30)


class Wire:
    """What a link writes (the socket's end)."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(bytes(data))

    def acks(self) -> list[int]:
        return [wire.decode_ack(f[wire.FRAME.size:]) for f in self.frames
                if f[4] == wire.ACK]


@pytest.fixture
def stores(tmp_path, small_config):
    master = MessageStore(tmp_path / "m", small_config())
    slave = MessageStore(tmp_path / "s", small_config())
    yield master, slave
    slave.close()
    master.close()


def data(offset: int, end: int, payload: bytes) -> tuple[int, bytes]:
    """A DATA frame as the slave's reader hands it on: (kind, body)."""
    return wire.DATA, wire.data_frame(offset, end, 0, 1, payload)[wire.FRAME.size:]


def follower(tmp_path, slave: MessageStore) -> ReplicaClient:
    return ReplicaClient(slave, EpochFile(tmp_path / "epochs.json"), "s", "g",
                         MasterInfo("m", "127.0.0.1:1", 1), known_epoch=lambda: 1,
                         on_records=lambda touched: None, on_meta=lambda doc: None,
                         on_truncate=lambda offset, cut: None)


def test_a_transfer_that_ends_inside_a_record_is_acked_to_the_last_whole_one(tmp_path, stores):
    master, slave = stores
    ends = [master.put("orders", 0, bytes([i]) * 100).end_offset for i in range(3)]
    cl = master.commitlog
    cut = ends[1] + HEADER.size  # the third record's header is here, its body is not
    client, out = follower(tmp_path, slave), Wire()
    client._frames([data(0, ends[2], cl.read(0, cut))], out)
    assert out.acks() == [ends[1]]  # two whole records held
    client._frames([data(cut, ends[2], cl.read(cut, ends[2] - cut))], out)
    assert out.acks() == [ends[1], ends[2]]
    assert [m.body[0] for m in slave.get("orders", 0, 0, 10).messages] == [0, 1, 2]


def test_one_read_of_many_frames_is_written_in_order_and_acked_once(tmp_path, stores):
    master, slave = stores
    ends = [master.put("orders", i % 4, b"x" * 50).end_offset for i in range(10)]
    cl, start = master.commitlog, 0
    frames = []
    for end in ends:
        frames.append(data(start, end, cl.read(start, end - start)))
        start = end
    client, out = follower(tmp_path, slave), Wire()
    client._frames(frames, out)
    assert out.acks() == [ends[-1]]
    assert slave.commitlog.write_offset == ends[-1]


def test_an_ack_releases_every_send_it_covers_and_none_past_it(stores):
    master, _slave = stores

    async def main():
        rm = ReplicationMaster(master, "g", sync=True, timeout_s=5.0, epoch=lambda: 1,
                               history=lambda: None, is_master=lambda: True, meta=dict)
        rm.in_sync = {"s"}
        link = SlaveLink(rm)
        link.name = "s"
        answered: dict[int, Code] = {}
        for end in (100, 200, 300):
            assert rm.park(end, lambda code, end=end: answered.__setitem__(end, code)) is None
        link.acked = 200  # exactly the second one's end
        rm.on_ack(link)
        assert answered == {100: Code.OK, 200: Code.OK}
        link.acked = 301  # one past the third
        rm.on_ack(link)
        assert answered == {100: Code.OK, 200: Code.OK, 300: Code.OK}
        assert rm.park(250, answered.__setitem__) == Code.OK  # already held: answered now
        rm.in_sync = set()
        assert rm.park(400, answered.__setitem__) == Code.SLAVE_NOT_AVAILABLE

    asyncio.run(main())


def test_a_parked_send_times_out_once_and_a_late_ack_does_not_answer_it_again(stores):
    master, _slave = stores

    async def main():
        now = [0.0]
        rm = ReplicationMaster(master, "g", sync=True, timeout_s=3.0, epoch=lambda: 1,
                               history=lambda: None, is_master=lambda: True, meta=dict,
                               clock=lambda: now[0])
        rm.in_sync = {"s"}
        calls: list[Code] = []
        assert rm.park(100, calls.append) is None
        now[0] = 3.5
        rm._sweep()
        assert calls == [Code.FLUSH_SLAVE_TIMEOUT]
        link = SlaveLink(rm)
        link.name, link.acked = "s", 100
        rm.on_ack(link)
        assert calls == [Code.FLUSH_SLAVE_TIMEOUT]  # once only

    asyncio.run(main())
