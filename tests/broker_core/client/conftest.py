"""Real brokers in this process: their asyncio servers on a thread of their own, on
real sockets and real stores, for the clients' tests."""

from __future__ import annotations

import asyncio
import re
import socket
import threading

import pytest

from broker_core.cluster.ports import free_port_range
from broker_core.server.broker import BrokerConfig
from broker_core.server.runner import serve
from tests.broker_core.client.live_brokers import Brokers


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


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """Brokers b1 and b2 for the module's tests (each test sends to a topic of its own)."""
    cluster = Brokers(tmp_path_factory.mktemp("brokers"))
    try:
        cluster.start("b1")
        cluster.start("b2")
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def b3(brokers):
    """A third broker, for a test that takes it down."""
    addr = brokers.start("b3")
    yield addr
    if "b3" in brokers.running:
        brokers.stop("b3")


@pytest.fixture
def topic(request) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:100]


@pytest.fixture
def down():
    """An address that refuses connections: a port bound (so nobody else takes it)
    but not listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def silent():
    """A broker that takes connections and never answers: the kernel completes them on a
    listening port nobody accepts on."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        yield f"127.0.0.1:{s.getsockname()[1]}"
