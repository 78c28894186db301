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
        self._state = state
        brokers = [b for b in state.brokers if matches(b, self.filter_text)]
        if self.sort_column is not None:
            brokers = sort_brokers(brokers, self.sort_column, self.sort_reverse)
        keys = [b.key for b in brokers]
        rows = {b.key: [col.cell(b) for col in COLUMNS] + [b.reason] for b in brokers}
        if keys == self.visible_keys:
            for key in keys:
                for i, cell in enumerate(rows[key]):
                    why = i == len(COLUMNS)
                    self.update_cell(key, "why" if why else str(i), cell, update_width=why)
            return
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
