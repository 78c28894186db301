"""Textual's Header with its title redrawn in place.

Textual's header title is a Static whose `update` lays out the whole screen again; its
size never changes (one line, the width left between icon and clock), so that pass buys
nothing. The demo's header carries its act and clock, a new title each second: the
layout pass it forced was a fifth of the demo console's CPU (the app sets that title
quietly and calls `retitle`, as the reactive's own repaint was a full redraw).
"""

from __future__ import annotations

from textual.widgets import Header
from textual.widgets._header import HeaderTitle  # (not exported; the type Header queries)


class InPlaceTitle(HeaderTitle):
    def update(self, content="", *, layout: bool = False) -> None:
        super().update(content, layout=layout)


class TitleHeader(Header):
    def compose(self):
        for child in super().compose():
            yield InPlaceTitle() if type(child) is HeaderTitle else child

    def retitle(self) -> None:
        """Draw the app's and screen's titles again (the app set them quietly)."""
        self.query_one(InPlaceTitle).update(self.format_title())
