"""The floodgate console: a thin Textual App.

It owns the Poller (console/data/poller.py) and the latest ClusterState; polling
threads hand states over as messages, and the App passes each to the screen
on top. Screens: cluster (default), a broker (Enter), consumer groups (and one
group's queues), fuse, host, alerts.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message

from console.config import ConsoleConfig
from console.data.poller import Poller
from console.tui.screens import (
    AlertsScreen,
    ClusterScreen,
    ConsumersScreen,
    FuseScreen,
    HelpScreen,
    HostScreen,
    TraceScreen,
)
from console.tui.widgets import TitleHeader


class StateUpdated(Message):
    def __init__(self, state) -> None:
        super().__init__()
        self.state = state


class FloodgateApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "floodgate"
    MODES = {"cluster": ClusterScreen, "consumers": ConsumersScreen, "fuse": FuseScreen,
             "host": HostScreen, "alerts": AlertsScreen,
             "trace": TraceScreen}
    DEFAULT_MODE = "cluster"
    HINT_S = 8  # how long the start hint stays (a toast sits over the alerts and the whys)
    BINDINGS = [
        Binding("c", "cluster", "Cluster"),
        Binding("g", "switch_mode('consumers')", "Groups"),
        Binding("f", "switch_mode('fuse')", "Fuse"),
        Binding("h", "switch_mode('host')", "Host"),
        Binding("a", "switch_mode('alerts')", "Alerts"),
        Binding("t", "switch_mode('trace')", "Trace"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, cfg: ConsoleConfig, poller: Poller | None = None,
                 hint: str | None = None, narration: Callable[[], str] | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.hint = hint  # shown once at start, e.g. how to run `floodgate status` on the demo
        self.narration = narration  # the header's last words each refresh (the demo's act)
        self.state = None
        self.poller = poller or Poller.from_config(cfg)
        self.poller.on_state = lambda state: self.post_message(StateUpdated(state))
        self.sub_title = cfg.title

    def on_mount(self) -> None:
        self.poller.start()
        if self.hint:
            self.notify(self.hint, timeout=self.HINT_S)

    def on_unmount(self) -> None:
        self.poller.stop(join=0.5)

    def on_state_updated(self, message: StateUpdated) -> None:
        before = self.state
        self.state = message.state
        for alert in message.state.alerts.since(before.alerts) if before is not None else ():
            if alert.key.startswith("down:") and not alert.cleared:
                self.notify(alert.text, severity="error", timeout=10)
        n = message.state.summary.brokers
        self._retitle(f"{self.cfg.title} · {n} brokers · refresh {self.cfg.refresh:g} s" + (
            f" · {self.narration()}" if self.narration is not None else ""))
        if not self.is_running or not self.screen_stack:  # stopping: its screens are being
            return  # taken apart (a poll that lands then has nowhere to go)
        screen = self.screen
        update = getattr(screen, "update_state", None)
        # a screen still being put together has no widgets to fill: it takes the state
        # when it is shown (StateScreen.on_screen_resume, after its mount)
        if update is not None and screen.is_mounted:
            update(message.state)

    def _retitle(self, sub_title: str) -> None:
        """The header's new words without the sub_title reactive's repaint of the whole
        screen (the demo's act and clock change them each second: with the layout it
        forced, 38 % of its console's loop); a screen's header reads it when mounted."""
        if sub_title == self.sub_title:
            return
        self.set_reactive(FloodgateApp.sub_title, sub_title)
        if self.is_running and self.screen_stack:
            for header in self.screen.query(TitleHeader):
                header.retitle()

    async def action_cluster(self) -> None:
        """The cluster table itself, not whatever was opened on top of it (a broker)."""
        await self.switch_mode("cluster")
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ClusterScreen):
            await self.pop_screen()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for mode, text in (("cluster", "the broker table"),
                           ("consumers", "consumer groups' lag, flow control"),
                           ("fuse", "producers' fuses"),
                           ("host", "tuning and host figures"), ("alerts", "SLA alerts"),
                           ("trace", "message trace by key or id")):
            yield SystemCommand(f"Show {mode}", text, self.action_cluster if mode == "cluster"
                                else lambda m=mode: self.switch_mode(m))
