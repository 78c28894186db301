"""What every screen shares: Esc goes back, and a data screen redraws its panels
from the app's state."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

from console.tui.widgets import PanelView, TitleHeader


class BackOnEscape(Screen):
    """Esc, as the help screen says: back to the screen this one was opened from, or,
    from a mode of its own (fuse, groups, host, alerts, trace), to the cluster."""

    BINDINGS = [Binding("escape", "back", "Back")]

    async def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            await self.app.action_cluster()


class StateScreen(BackOnEscape):
    def update_state(self, state) -> None:
        for view in self.query(PanelView):
            view.update_state(state)

    def on_screen_resume(self) -> None:
        for header in self.query(TitleHeader):  # the app's title moved on while hidden
            header.retitle()
        state = getattr(self.app, "state", None)
        if state is not None:
            self.update_state(state)
