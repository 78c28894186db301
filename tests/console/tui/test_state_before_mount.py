"""A state that arrives while a screen is still being put together (a poll landing between
a screen's push and its widgets' mount: a CI run caught it on the cluster screen) waits
for the screen: nothing raises, and the screen shows the state once it is up."""

from __future__ import annotations

import asyncio

from console.tui.app import StateUpdated
from console.tui.screens.cluster import ClusterScreen
from console.tui.widgets import BrokerTable
from tests.console.tui.test_consumers_screen import ready, replay_app


def test_a_state_before_the_screen_is_mounted_waits_for_it(tmp_path):
    async def go():
        app = replay_app(tmp_path)
        async with app.run_test(size=(150, 40)) as pilot:
            await ready(pilot)
            screen = ClusterScreen()
            mounted = app.push_screen(screen)  # (not awaited: its widgets are not up yet)
            assert app.screen is screen and not screen.is_mounted
            app.on_state_updated(StateUpdated(app.state))  # must not raise
            await mounted
            await pilot.pause()
            assert len(screen.query_one(BrokerTable).visible_keys) == 2  # filled once up
    asyncio.run(go())


