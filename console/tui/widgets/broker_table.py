"""The cluster's broker table: sortable, filterable, colour for SLA breaches.

A line-API widget rather than Textual's DataTable: at 200 brokers and a 1 s
refresh nearly every cell changes each second, and DataTable re-renders every
visible cell through Rich on any change (~160 ms a frame on the 2-core test
machine). Here a row is one Rich Text rendered once per change and cached as a
Strip, so a refresh costs the rows that changed. Rows are keyed by the
broker's HTTP address, so the cursor stays on the same broker across
refreshes, sorts and filters.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.tui.panels.brokers import COLUMNS, columns_for, matches, sort_brokers

GAP = 2
CURSOR = Style(bgcolor="#2d4f67", bold=True)
CURSOR_BLURRED = Style(bgcolor="#303030")
HEADER = Style(bold=True)


class BrokerChosen(Message):
    """Enter on a row: the screen opens that broker."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class BrokerTable(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "cursor(-100000)", show=False),
        Binding("end", "cursor(100000)", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sort_column: int | None = None  # None: the order of the cluster file
        self.sort_reverse = False
        self.filter_text = ""
        self.visible_keys: list[str] = []
        self.cursor_row = 0
        self._state = None
        self._cells: dict[str, list[Text]] = {}
        self._strips: dict[tuple[str, bool, bool, int], Strip] = {}
        self.columns = COLUMNS  # with the HA columns once a broker reports a role
        self._widths = [c.width or len(c.label) for c in COLUMNS]

    # --- data ------------------------------------------------------------------------
    def set_view(self, sort_column: int | None = None, reverse: bool | None = None,
                 filter_text: str | None = None) -> None:
        if sort_column is not None:
            self.sort_column = sort_column
        if reverse is not None:
            self.sort_reverse = reverse
        if filter_text is not None:
            self.filter_text = filter_text
        if self._state is not None:
            self.update_state(self._state)

    def update_state(self, state) -> None:
        current = self.cursor_key
        if state is not self._state:
            self._state = state
            columns = columns_for(state.brokers)
            if columns != self.columns:
                self.columns = columns
                self.sort_column = None
                self._cells.clear()
                self._strips.clear()
                self._widths = [c.width or len(c.label) for c in columns]
            for b in state.brokers:
                cells = [col.cell(b, state.sla) for col in columns] + [Text(b.reason, style="dim")]
                if cells != self._cells.get(b.key) or _styles(cells) != _styles(
                        self._cells.get(b.key, ())):
                    self._cells[b.key] = cells
                    self._forget(b.key)
            widths = [max(w, *(len(self._cells[b.key][i].plain) for b in state.brokers))
                      if columns[i].width is None else w
                      for i, w in enumerate(self._widths)] if state.brokers else self._widths
            if widths != self._widths:
                self._widths = widths
                self._strips.clear()
        brokers = [b for b in state.brokers if matches(b, self.filter_text)]
        if self.sort_column is not None:
            brokers = sort_brokers(brokers, self.sort_column, self.sort_reverse, self.columns)
        self.visible_keys = [b.key for b in brokers]
        if current in self.visible_keys:
            self.cursor_row = self.visible_keys.index(current)
        self.cursor_row = max(0, min(self.cursor_row, len(self.visible_keys) - 1))
        self.virtual_size = Size(self._line_width(), len(self.visible_keys) + 1)
        self._scroll_to_cursor()
        self.refresh()

    def _forget(self, key: str) -> None:
        for k in [k for k in self._strips if k[0] == key]:
            del self._strips[k]

    @property
    def cursor_key(self) -> str | None:
        if 0 <= self.cursor_row < len(self.visible_keys):
            return self.visible_keys[self.cursor_row]
        return None

    def cell_text(self, key: str, column: int) -> str:
        return self._cells[key][column].plain

    # --- drawing ---------------------------------------------------------------------
    def _line_width(self) -> int:
        return sum(self._widths) + GAP * len(self._widths) + 60  # + the "why" text

    def _line(self, cells: list[Text], bold: bool = False) -> Text:
        line = Text(" ", end="", no_wrap=True)
        for i, cell in enumerate(cells[:len(self.columns)]):
            width = self._widths[i]
            cell = cell.copy()
            cell.truncate(width)
            pad = " " * (width - cell.cell_len)
            if self.columns[i].numeric:
                line.append(pad)
                line.append_text(cell)
            else:
                line.append_text(cell)
                line.append(pad)
            line.append(" " * GAP)
        for extra in cells[len(self.columns):]:
            line.append_text(extra)
        if bold:
            line.stylize(HEADER)
        return line

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            labels = [Text(c.label) for c in self.columns] + [Text("why")]
            return self._render(("#header", False, False, width), labels, True)
        row = self.scroll_offset.y + y - 1
        if row >= len(self.visible_keys):
            return Strip.blank(width)
        key = self.visible_keys[row]
        is_cursor = row == self.cursor_row
        return self._render((key, is_cursor, is_cursor and self.has_focus, width),
                            self._cells[key], False)

    def _render(self, cache_key, cells, header: bool) -> Strip:
        strip = self._strips.get(cache_key)
        if strip is None:
            _, is_cursor, focused, width = cache_key
            segments = list(self._line(cells, header).render(self.app.console))
            strip = Strip(segments).crop_extend(self.scroll_offset.x,
                                                self.scroll_offset.x + width, None)
            if is_cursor:
                strip = strip.apply_style(CURSOR if focused else CURSOR_BLURRED)
            strip = strip.apply_style(self.rich_style)
            self._strips[cache_key] = strip
        return strip

    def watch_scroll_x(self, old: float, new: float) -> None:
        self._strips.clear()  # strips are cropped at the horizontal offset
        super().watch_scroll_x(old, new)

    def on_focus(self) -> None:
        self._strips.clear()
        self.refresh()

    def on_blur(self) -> None:
        self.on_focus()

    # --- moving ----------------------------------------------------------------------
    def _scroll_to_cursor(self) -> None:
        body = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + body:
            self.scroll_to(y=self.cursor_row - body + 1, animate=False)

    def _move(self, row: int) -> None:
        old = self.cursor_key
        self.cursor_row = max(0, min(row, len(self.visible_keys) - 1))
        for key in (old, self.cursor_key):
            if key is not None:
                self._forget(key)
        self._scroll_to_cursor()
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor_row + direction * max(1, self.size.height - 2))

    def action_select(self) -> None:
        if self.cursor_key is not None:
            self.post_message(BrokerChosen(self.cursor_key))

    def on_click(self, event) -> None:
        if event.y == 0:  # the header: sort by the column under the pointer
            x, edge = event.x + self.scroll_offset.x - 1, 0
            for i, width in enumerate(self._widths):
                edge += width + GAP
                if x < edge:
                    self.set_view(i, not self.sort_reverse if i == self.sort_column else False)
                    return
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.visible_keys):
            if row == self.cursor_row and event.chain >= 2:
                self.action_select()
            self._move(row)


def _styles(cells) -> list:
    return [str(c.style) for c in cells]
