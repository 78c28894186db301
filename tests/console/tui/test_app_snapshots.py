"""Snapshot tests of every screen at a fixed size, from recorded /stats files
(tests/console/recorded/demo: a real demo, broker-2 stalled and isolated).

Review a changed picture (`pytest --snapshot-report`) before accepting it
with `--snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp

DATA = Path(__file__).parents[1] / "recorded" / "demo"
SIZE = (150, 44)


def replay_app() -> FloodgateApp:
    # one poll only: the picture must not depend on how many refreshes ran
    return FloodgateApp(ConsoleConfig(replay=DATA, refresh=3600, title="replay").validate())


async def until_state(pilot) -> None:
    for _ in range(200):
        if pilot.app.state is not None:
            break
        await pilot.pause(0.05)
    await pilot.pause()


def keys_then_wait(*keys: str):
    async def run_before(pilot) -> None:
        await until_state(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
    return run_before


@pytest.mark.parametrize("name,keys", [
    ("cluster", ()),
    ("cluster_sorted_by_p99", ("s",) * 7),
    ("cluster_filtered", ("slash", "i", "s", "o", "enter")),
    ("broker_heatmap", ("down", "enter")),
    ("fuse", ("f",)),
    ("host", ("h",)),
    ("alerts", ("a",)),
    ("help", ("question_mark",)),
])
def test_screen(snap_compare, name, keys):
    assert snap_compare(replay_app(), terminal_size=SIZE, run_before=keys_then_wait(*keys))
