"""The consumer groups as a table with a cursor: Enter on a row asks the screen
to open that group (`GroupChosen`).

Textual's DataTable, unlike the broker table: a cluster has a handful of
groups, not 200 brokers, so redrawing every cell each refresh is cheap. Rows
are keyed by group name, so the cursor stays on its group when the order
(worst first) changes.
"""

from __future__ import annotations

from textual.message import Message
from textual.widgets import DataTable

from console.tui.panels.consumers import COLUMNS


class GroupChosen(Message):
    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group


class GroupTable(DataTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.groups: list[str] = []  # in the order shown

    def on_mount(self) -> None:
        for col in COLUMNS:
            self.add_column(col.label, key=col.label)

    def update_state(self, state) -> None:
        current = self.cursor_group
        self.clear()
        self.groups = [g.name for g in state.consumers]
        for g in state.consumers:
            cells = [col.cell(g) for col in COLUMNS]
            for col, cell in zip(COLUMNS, cells, strict=True):
                if col.numeric:
                    cell.justify = "right"
            self.add_row(*cells, key=g.name)
        if current in self.groups:
            self.move_cursor(row=self.groups.index(current), animate=False)

    @property
    def cursor_group(self) -> str | None:
        if 0 <= self.cursor_row < len(self.groups):
            return self.groups[self.cursor_row]
        return None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(GroupChosen(str(event.row_key.value)))
