"""The cluster's broker table: sortable, filterable, colour for SLA breaches.

Rows are keyed by the broker's HTTP address, so the cursor stays on the same
broker across refreshes and re-sorts. When the row order is unchanged only
the cells are updated (no flicker, cheap at 200 brokers).
"""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.panels.brokers import COLUMNS, matches, sort_brokers


class BrokerChosen(Message):
    """Enter on a row: the screen opens that broker."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class BrokerTable(DataTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.sort_column: int | None = None  # None: the order of the cluster file
        self.sort_reverse = False
        self.filter_text = ""
        self.visible_keys: list[str] = []
        self._state = None
        self._why_width = 0
        self._shown: dict[str, list] = {}  # cells on screen per row key

    def on_mount(self) -> None:
        for i, col in enumerate(COLUMNS):
            label = Text(col.label, justify="right" if col.numeric else "left")
            self.add_column(label, key=str(i), width=col.width)
        self.add_column("why", key="why")

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
        fresh = state is not self._state  # False: only the sort or the filter changed
        self._state = state
        brokers = [b for b in state.brokers if matches(b, self.filter_text)]
        if self.sort_column is not None:
            brokers = sort_brokers(brokers, self.sort_column, self.sort_reverse)
        keys = [b.key for b in brokers]
        if fresh or not self._shown:
            rows = {b.key: [col.cell(b) for col in COLUMNS] + [b.reason] for b in brokers}
        else:  # the cells on screen are this state's already
            rows = {b.key: self._shown.get(b.key) or [col.cell(b) for col in COLUMNS] + [b.reason]
                    for b in brokers}
        why_width = max((len(b.reason) for b in brokers), default=0)
        names = [b.name for b in brokers]
        if (keys != self.visible_keys and set(keys) == set(self.visible_keys)
                and len(set(names)) == len(names)):
            # Same rows, new order (a sort): reorder in place instead of rebuilding.
            current = self.cursor_key
            order = {name: i for i, name in enumerate(names)}
            self.sort("0", key=lambda cell: order[str(cell)])
            self.visible_keys = keys
            if current in keys:
                self.move_cursor(row=keys.index(current), animate=False)
        if keys == self.visible_keys and why_width <= self._why_width:
            # Same rows: update the cells in place. Widths are fixed (the "why" column is
            # rebuilt below when it must grow): DataTable re-measures a whole column per
            # shrinking cell with update_width, quadratic at 200 brokers.
            for key in keys if fresh else ():
                before = self._shown.get(key, ())
                for i, cell in enumerate(rows[key]):
                    if i < len(before) and _same(before[i], cell):
                        continue  # unchanged: no repaint
                    self.update_cell(key, "why" if i == len(COLUMNS) else str(i), cell)
            self._shown.update(rows)
            return
        self._why_width = why_width
        self._shown = rows
        current = self.cursor_key
        self.clear()
        for key in keys:
            self.add_row(*rows[key], key=key)
        self.visible_keys = keys
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False)

    @property
    def cursor_key(self) -> str | None:
        if not self.visible_keys or self.cursor_row >= len(self.visible_keys):
            return None
        return self.visible_keys[self.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(BrokerChosen(str(event.row_key.value)))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value == "why":
            return
        col = int(event.column_key.value)
        self.set_view(col, not self.sort_reverse if col == self.sort_column else False)


def _same(a, b) -> bool:
    """Rich Text equality ignores the base style; a colour change must repaint."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b
