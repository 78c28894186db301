"""A slave whose master refuses connections (killed, not yet replaced) leaves nothing
behind: uvloop makes the link's protocol before it connects, and each refused attempt
left a watchdog running that, 5 s on, ended a link nobody waited for — "Future exception
was never retrieved" in the new master's log after every failover."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
import uvloop

from broker_core.cluster.ports import free_port_range
from broker_core.ha import slave as slave_module
from broker_core.ha.epochs import EpochFile
from broker_core.ha.slave import MasterInfo, ReplicaClient
from broker_core.store import MessageStore

pytestmark = pytest.mark.timeout(30)


def test_refused_attempts_leave_no_link_to_end_later(tmp_path, small_config, monkeypatch,
                                                     caplog):
    monkeypatch.setattr(slave_module, "HELLO_ANSWER_S", 0.3)  # the watchdog's limit
    store = MessageStore(tmp_path / "s", small_config())
    nobody = free_port_range(1)  # nothing listens there: every attempt is refused
    client = ReplicaClient(store, EpochFile(tmp_path / "epochs.json"), "s", "g",
                           MasterInfo("m", f"127.0.0.1:{nobody}", 1), known_epoch=lambda: 1,
                           on_records=lambda touched: None, on_meta=lambda doc: None,
                           on_truncate=lambda offset, cut: None)
    ended = []
    real_end = slave_module._Follower._end
    monkeypatch.setattr(slave_module._Follower, "_end",
                        lambda self, exc: (ended.append(exc), real_end(self, exc)))

    async def run() -> None:
        client.start()
        await asyncio.sleep(0.7)  # three or four refused attempts, RETRY_S apart
        await client.stop()  # the broker became master: nobody follows any more
        await asyncio.sleep(0.8)  # past the watchdog's limit

    caplog.set_level(logging.ERROR, logger="asyncio")
    try:
        uvloop.run(run())
        gc.collect()  # an unretrieved exception is logged when its future goes
    finally:
        store.close()
    assert "refused" in client.last_error.lower()
    assert ended == []  # no link was ever made, so none was ended by a watchdog
    assert "never retrieved" not in caplog.text
