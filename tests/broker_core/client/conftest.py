"""A real broker in this process: its asyncio server on a thread of its own, on
real sockets and a real store, for the clients' tests."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker_core.cluster.ports import free_port_range
from broker_core.server.broker import BrokerConfig
from broker_core.server.runner import serve


@pytest.fixture
def broker_addr(tmp_path):
    """The data address of a broker serving until the test ends."""
    port = free_port_range(2)
    config = BrokerConfig("b1", tmp_path / "b1", port=port, http_port=port + 1,
                          segment_bytes=8 << 20)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    failed: list[BaseException] = []

    def run():
        try:
            loop.run_until_complete(serve(config, stop))
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True, name="broker-b1")
    thread.start()
    import socket
    import time

    deadline = time.monotonic() + 20
    while True:  # serving once the data port answers
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert not failed, failed
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.02)
    try:
        yield config.addr
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(20)
        loop.close()
        assert not failed, failed
