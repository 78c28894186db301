"""What every data screen shares: redraw its panels from the app's state."""

from __future__ import annotations

from textual.screen import Screen

from console.tui.widgets import PanelView


class StateScreen(Screen):
    def update_state(self, state) -> None:
        for view in self.query(PanelView):
            view.update_state(state)

    def on_screen_resume(self) -> None:
        state = getattr(self.app, "state", None)
        if state is not None:
            self.update_state(state)
