"""The trace screen against a real broker: a key typed in the search box shows the
message's timeline; a broker's `t` lists the slowest traced sends of its spike."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker_core.client.producer import Producer
from broker_core.cluster.trace_finder import TraceFinder
from console.config import ConsoleConfig
from console.tui.app import FloodgateApp
from console.tui.screens import BrokerScreen, TraceScreen

pytestmark = pytest.mark.integration  # a real broker process


async def wait_for(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"condition not met within {timeout} s")


def test_search_by_key_and_samples_from_a_broker_spike(cluster_factory):
    cluster = cluster_factory(1)
    with Producer(cluster.file.addrs, trace_rate=1.0) as producer:
        sent = [producer.send("orders", b"paid", keys=f"order-{i}") for i in range(30)]
    # the broker writes its store summary on its one-second tick: wait for it
    finder = TraceFinder(cluster.file)
    try:
        deadline = time.monotonic() + 10
        while finder.by_id(sent[7].msg_id).timelines[0].store is None:
            assert time.monotonic() < deadline, "no store record after 10 s"
            time.sleep(0.1)
    finally:
        finder.close()
    brokers = [(b.name, b.http) for b in cluster.file.brokers]
    cfg = ConsoleConfig(brokers=brokers, refresh=0.25, timeout=0.5,
                        cluster=cluster.path).validate()
    asyncio.run(drive(FloodgateApp(cfg), sent))


async def drive(app, sent) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("t")
        assert isinstance(app.screen, TraceScreen)
        await pilot.press(*"order-7", "enter")
        await wait_for(pilot, lambda: any("stored on broker-1" in ln for ln in app.screen.lines))
        assert app.screen.lines[0].startswith(f"message {sent[7].msg_id}")
        assert any("sent by" in ln for ln in app.screen.lines)

        await pilot.press("escape")  # the search box has the keys: Esc leaves the mode
        await wait_for(pilot, lambda: app.state is not None and app.state.brokers
                       and app.state.brokers[0].history)
        await pilot.press("enter")
        assert isinstance(app.screen, BrokerScreen)
        await pilot.press("t")
        assert isinstance(app.screen, TraceScreen)
        await wait_for(pilot, lambda: app.screen.sample_ids)
        assert set(app.screen.sample_ids) <= {r.msg_id for r in sent}
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("stored on" in ln for ln in app.screen.lines))
