"""The console against a real 3-broker cluster: rows appear, sort and filter
work, Enter opens a broker's heatmap, a killed broker turns DOWN within two
refreshes and UP again when it returns."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp
from console.tui.panels.heatmap import FittedHeatmap
from console.tui.screens import BrokerScreen
from console.tui.widgets import BrokerTable, PanelView

pytestmark = pytest.mark.integration  # real broker processes
REFRESH = 0.25


def make_app(cluster) -> FloodgateApp:
    brokers = [(b.name, b.http) for b in cluster.file.brokers]
    return FloodgateApp(ConsoleConfig(brokers=brokers, refresh=REFRESH, timeout=0.5).validate())


async def wait_for(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"condition not met within {timeout} s")


def names(app) -> list[str]:
    table = app.screen.query_one(BrokerTable)
    return [app.state.broker(k).name for k in table.visible_keys]


def test_rows_sort_filter_and_heatmap(cluster3):
    asyncio.run(rows_sort_filter_and_heatmap(cluster3))


async def rows_sort_filter_and_heatmap(cluster3):
    app = make_app(cluster3)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and
                       len(app.screen.query_one(BrokerTable).visible_keys) == 3)
        assert names(app) == ["broker-1", "broker-2", "broker-3"]
        assert all(b.state in ("UP", "SLOW") for b in app.state.brokers)

        await pilot.press("s")  # sort by broker name, ascending
        await pilot.press("r")  # descending
        await pilot.pause()
        assert names(app) == ["broker-3", "broker-2", "broker-1"]

        await pilot.press("slash", *"broker-2", "enter")
        await pilot.pause()
        assert names(app) == ["broker-2"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(names(app)) == 3

        await pilot.press("enter")  # the cursor kept to broker-2, the one the filter showed
        await wait_for(pilot, lambda: isinstance(app.screen, BrokerScreen))
        view = app.screen.query_one("#heatmap", PanelView)
        await wait_for(pilot, lambda: isinstance(view.content, FittedHeatmap))
        assert "broker-2" in view.content.title
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, BrokerScreen)


def test_killed_broker_turns_down_then_up(cluster3):
    asyncio.run(killed_broker_turns_down_then_up(cluster3))


async def killed_broker_turns_down_then_up(cluster3):
    app = make_app(cluster3)
    entry = cluster3.file.brokers[2]
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and
                       app.state.broker("broker-3").state != "DOWN")
        cluster3.procs[entry.name].kill()
        killed = time.monotonic()
        await wait_for(pilot, lambda: app.state.broker("broker-3").state == "DOWN")
        # two refreshes, each at most one timeout late (connection refused is instant)
        assert time.monotonic() - killed < 2 * (REFRESH + 0.5) + 2.0  # + a busy machine
        table = app.screen.query_one(BrokerTable)
        assert table.cell_text(entry.http, 1) == "DOWN"
        assert "down:broker-3" in {a.key for a in app.state.active_alerts}
        cluster3.procs[entry.name].wait()
        cluster3.start_broker(entry)
        await wait_for(pilot, lambda: app.state.broker("broker-3").state in ("UP", "SLOW"),
                       timeout=20)
