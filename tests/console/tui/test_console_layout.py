"""Console defects from the live demo trial (issue 14), on recorded /stats:
the broker screen fits the terminal (events usable at 200x50, sensible at
80x24, no scrollbar blocks beside the heatmap), `c` goes to the cluster
table from a broker, and the start toast stays off the alerts panel."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets._toast import Toast

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp
from console.tui.panels.heatmap import FittedHeatmap
from console.tui.screens import BrokerScreen, ClusterScreen, FuseScreen
from console.tui.widgets import PanelView

DATA = Path(__file__).parents[1] / "recorded" / "demo"
HINT = ("faults start at 6 s (broker-2 stalls, then broker-4 errors). In another terminal: "
        "floodgate status --cluster /tmp/floodgate-demo/cluster.toml --producers 127.0.0.1:34567")


def replay_app(hint: str | None = None) -> FloodgateApp:
    return FloodgateApp(ConsoleConfig(replay=DATA, refresh=3600).validate(), hint=hint)


async def ready(pilot) -> None:
    for _ in range(200):
        if pilot.app.state is not None:
            break
        await pilot.pause(0.05)
    await pilot.pause()


async def open_broker(pilot, row: int = 1) -> BrokerScreen:
    await ready(pilot)
    for _ in range(row):
        await pilot.press("down")
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(pilot.app.screen, BrokerScreen)
    return pilot.app.screen


def content_lines(view: PanelView) -> int:
    return view.content_region.height


@pytest.mark.parametrize("size", [(200, 50), (150, 44), (80, 24)])
def test_broker_screen_fits_the_terminal(size):
    async def go():
        app = replay_app()
        async with app.run_test(size=size) as pilot:
            screen = await open_broker(pilot)  # broker-2: 800 ms stalls, the tallest heatmap
            body = screen.query_one("#broker")
            shown = [v for v in screen.query(PanelView) if v.display]
            for view in shown:  # every panel whole on the screen, none below the footer
                assert screen.region.contains_region(view.region), view.id
                assert view.region.bottom <= body.region.bottom, view.id
            # nothing to scroll, so no scrollbar drawn beside the panels
            assert body.max_scroll_y == 0 and not body.show_vertical_scrollbar
            events = screen.query_one("#events", PanelView)
            heatmap = screen.query_one("#heatmap", PanelView)
            assert content_lines(events) >= (10 if size[1] >= 50 else 3)
            assert content_lines(heatmap) >= 6
            assert "1.0s" in str(heatmap.render_line(1).text)  # the stalls' row is on screen
    asyncio.run(go())


def test_short_terminal_keeps_heatmap_percentiles_and_events():
    async def go():
        app = replay_app()
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_broker(pilot)
            shown = {v.id for v in screen.query(PanelView) if v.display}
            assert shown == {"heatmap", "percentiles", "events"}
            events = screen.query_one("#events", PanelView)
            assert events.region.width == 80  # the whole width: one event a line
    asyncio.run(go())


def test_c_on_a_broker_screen_goes_to_the_cluster_table():
    async def go():
        app = replay_app()
        async with app.run_test(size=(150, 40)) as pilot:
            await open_broker(pilot)
            await pilot.press("c")
            await pilot.pause()
            assert isinstance(app.screen, ClusterScreen)
            await open_broker(pilot, row=0)  # from another mode too: f, then c
            await pilot.press("f")
            await pilot.pause()
            assert isinstance(app.screen, FuseScreen)
            await pilot.press("c")
            await pilot.pause()
            assert isinstance(app.screen, ClusterScreen) and len(app.screen_stack) == 1
    asyncio.run(go())


@pytest.mark.parametrize("size", [(150, 44), (100, 30)])
def test_start_toast_stays_off_the_alerts_panel(size):
    async def go():
        app = replay_app(HINT)
        app.HINT_S = 3600  # the test looks while it is shown, however slow the machine
        async with app.run_test(size=size, notifications=True) as pilot:
            await ready(pilot)
            toasts = []
            for _ in range(100):
                toasts = list(app.screen.query(Toast))
                if toasts and toasts[0].region.height:
                    break
                await pilot.pause(0.05)
            [toast] = toasts
            alerts = app.screen.query_one("#cluster-alerts").region  # border included
            view_line = app.screen.query_one("#view-line").region
            assert not toast.region.overlaps(alerts)
            assert not toast.region.overlaps(view_line)
            assert app.screen.region.contains_region(toast.region)
    asyncio.run(go())


def test_fitted_heatmap_keeps_the_slow_rows_in_any_height():
    import json

    from broker_core.observe.stats_doc import BrokerStats
    from console.data.state import BrokerSample, build_state

    doc = json.loads((DATA / "brokers" / "broker-2.json").read_text())
    stats = BrokerStats.from_dict(doc)
    broker = build_state([BrokerSample("b2", "broker-2", stats)], now=1).brokers[0]
    heatmap = FittedHeatmap(list(broker.history), "broker-2")
    console = Console(width=120, file=None)
    natural = console.render_lines(heatmap, console.options, pad=False)
    for height in (40, 30, 20, 12, 8, 5):
        lines = console.render_lines(heatmap, console.options.update(height=height), pad=False)
        text = ["".join(s.text for s in line) for line in lines]
        assert len(text) <= height
        assert any(t.lstrip().startswith("1.0s│") or "841ms│" in t for t in text), height
    assert len(natural) > 30  # without a height: schema 2, whole


def test_the_heatmap_title_says_how_much_history_it_holds():
    """Rough edge 10: the README says 5 minutes and the title read `last 180 s`: the
    title now says that a shorter picture is still filling."""
    from types import SimpleNamespace

    from console.tui.panels.heatmap import render
    from heatmap import LatencyHistogram

    def state(seconds: int):
        hist = LatencyHistogram()
        hist.record(0.001)
        broker = SimpleNamespace(name="b1", history=[(t, hist) for t in range(seconds)])
        return SimpleNamespace(broker=lambda _focus: broker)

    assert render(state(180), "b1").title == "b1 send latency, last 180 s (fills to 5 min)"
    assert render(state(300), "b1").title == "b1 send latency, last 300 s"


def test_why_a_broker_is_not_up_shows_under_the_table_at_any_width():
    """The table's last column, `why`, showed three letters at 170 columns in the demo."""
    from dataclasses import replace

    async def go():
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot)
            screen = app.screen
            reasons = screen.query_one("#broker-reasons", PanelView)
            assert reasons.display and reasons.region.height == 1
            assert screen.region.contains_region(reasons.region)
            assert "broker-3  ISOLATED  fuse of demo: slow" in str(reasons.render())
            all_up = replace(app.state, brokers=tuple(
                replace(b, state="UP", reason="") for b in app.state.brokers))
            screen.update_state(all_up)
            await pilot.pause()
            assert not reasons.display  # no room taken while every broker is UP
    asyncio.run(go())
