"""The console on recorded /stats (no cluster): mouse sorting, screens by key,
help, and a filter that matches nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp, StateUpdated
from console.tui.panels.brokers import COLUMNS
from console.tui.screens import (
    AlertsScreen,
    BrokerScreen,
    ClusterScreen,
    ConsumersScreen,
    FuseScreen,
    HelpScreen,
    HostScreen,
)
from console.tui.widgets import BrokerTable, PanelView, TitleHeader
from console.tui.widgets.title_header import InPlaceTitle

DATA = Path(__file__).parents[1] / "recorded" / "demo"


def replay_app() -> FloodgateApp:
    return FloodgateApp(ConsoleConfig(replay=DATA, refresh=3600).validate())


async def ready(pilot) -> BrokerTable:
    for _ in range(200):
        if pilot.app.state is not None:
            break
        await pilot.pause(0.05)
    await pilot.pause()
    return pilot.app.screen.query_one(BrokerTable)


def test_header_click_sorts_and_a_second_click_reverses():
    async def go():
        app = replay_app()
        async with app.run_test(size=(150, 40)) as pilot:
            table = await ready(pilot)
            p99 = next(i for i, c in enumerate(COLUMNS) if c.label == "p99")
            x = 1 + sum(table._widths[:p99]) + 2 * p99 + 2
            await pilot.click(BrokerTable, offset=(x, 0))
            assert (table.sort_column, table.sort_reverse) == (p99, False)
            values = [app.state.broker(k).p99 for k in table.visible_keys]
            assert None not in values and values == sorted(values)
            await pilot.click(BrokerTable, offset=(x, 0))
            assert table.sort_reverse is True
            await pilot.click(BrokerTable, offset=(3, 3))  # a row: the cursor goes there
            assert table.cursor_row == 2
    asyncio.run(go())


def test_screens_by_key_and_help():
    async def go():
        app = replay_app()
        async with app.run_test(size=(150, 40)) as pilot:
            await ready(pilot)
            for key, screen in (("f", FuseScreen), ("g", ConsumersScreen), ("h", HostScreen),
                                ("a", AlertsScreen)):
                await pilot.press(key)
                await pilot.pause()
                assert isinstance(app.screen, screen)
                await pilot.press("escape")  # as help says, on every screen: back
                await pilot.pause()
                assert isinstance(app.screen, ClusterScreen), key
                await pilot.press(key)
                await pilot.pause()
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("x")  # any key closes it
            assert isinstance(app.screen, AlertsScreen)
            await pilot.press("c")
            await pilot.press("slash", *"nothing-like-this", "enter")
            await pilot.pause()
            table = app.screen.query_one(BrokerTable)
            assert table.visible_keys == [] and table.cursor_key is None
            await pilot.press("enter")  # nothing to open: stays put
            await pilot.pause()
            assert app.screen.query_one(BrokerTable) is table
    asyncio.run(go())


def test_broker_screen_steps_between_brokers():
    async def go():
        app = replay_app()
        async with app.run_test(size=(150, 40)) as pilot:
            await ready(pilot)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, BrokerScreen) and app.screen.sub_title == "broker-1"
            await pilot.press("right_square_bracket")
            await pilot.pause()
            heatmap = app.screen.query_one("#heatmap", PanelView)
            assert heatmap.focus == "replay/broker-2" and "broker-2" in heatmap.content.title
            await pilot.press("left_square_bracket", "left_square_bracket")
            assert app.screen.sub_title == "broker-6"  # wraps around
    asyncio.run(go())


def test_the_demos_words_in_the_header_change_without_redrawing_the_screen():
    """The demo's header (its act and clock) changes each second: the title line alone
    is drawn again, not the whole screen laid out and repainted, and a screen shown
    again reads the words it missed."""
    words = iter(f"act {i}" for i in range(100))

    async def go():
        app = FloodgateApp(ConsoleConfig(replay=DATA, refresh=3600).validate(),
                           narration=lambda: next(words))
        async with app.run_test(size=(150, 40)) as pilot:
            await ready(pilot)
            screen = app.screen
            header = screen.query_one(TitleHeader)
            app.post_message(StateUpdated(app.state))
            await pilot.pause()
            title = str(header.query_one(InPlaceTitle).render())
            assert app.sub_title.endswith("act 1") and "act 1" in title
            compositor, full = screen._compositor, []
            draw_all = compositor.render_full_update
            compositor.render_full_update = lambda *a, **k: full.append(1) or draw_all(*a, **k)
            for _ in range(3):
                app.post_message(StateUpdated(app.state))
                await pilot.pause()
            assert app.sub_title.endswith("act 4") and "act 4" in str(header.query_one(InPlaceTitle).render())
            assert full == []  # the other widgets redrawn where they changed, none laid out
            await pilot.press("f")
            await pilot.pause()
            app.post_message(StateUpdated(app.state))
            await pilot.pause()
            await pilot.press("c")
            await pilot.pause()
            assert "act 5" in str(app.screen.query_one(InPlaceTitle).render())
    asyncio.run(go())
