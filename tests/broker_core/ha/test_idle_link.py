"""An idle replication pair arms only what liveness needs: the link's heartbeat (one
a second, META only when the tables may have changed) and the slave's watchdog."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.ha import wire
from tests.broker_core.ha.conftest import member
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)


class WatchedLoop(asyncio.SelectorEventLoop):
    def armed(self) -> list[asyncio.TimerHandle]:
        return [h for h in self._scheduled if not h.cancelled()]


def what(handle: asyncio.TimerHandle) -> str:
    cb = handle._callback
    owner = getattr(cb, "__self__", None)
    return getattr(owner, "name", "") or getattr(cb, "__qualname__", repr(cb))



def test_an_idle_pair_arms_a_heartbeat_and_a_watchdog_only(tmp_path):
    async def main():
        m = await member(tmp_path, "m")
        s = await member(tmp_path, "s")
        loop = asyncio.get_running_loop()
        try:
            await m.node.become_master(1, frozenset({"m"}))
            await s.node.become_slave(m.info(1), m.addr)
            await until(lambda: "s" in m.node.master.in_sync)
            r, w = await asyncio.open_connection(*m.addr.split(":"))
            w.write(p.encode_frame(p.Op.SEND, 1, p.encode_send("t", 0, p.OutMessage(b"x"))))
            await r.readexactly(p.HEADER_SIZE)
            w.close()
            end = m.broker.store.commitlog.write_offset
            await until(lambda: s.broker.store.commitlog.write_offset == end)
            await until(lambda: m.node.master._sweeper.when is None)  # acked: nothing to sweep
            kinds = sorted(what(h) for h in loop.armed())
            assert kinds == ["_Follower._watchdog", "replication heartbeat"], kinds
            link = next(iter(m.node.master.links.values()))
            await until(lambda: link._meta_sent == m.broker.meta_version(), timeout=3)  # told
            sent = link._meta_sent
            frames = s.node.slave.frames
            await until(lambda: s.node.slave.frames > frames, timeout=2 * wire.HEARTBEAT_S + 1)
            assert link._meta_sent == sent  # a heartbeat, no META: nothing changed
        finally:
            await s.close()
            await m.close()

    with asyncio.Runner(loop_factory=WatchedLoop) as runner:
        runner.run(main())
