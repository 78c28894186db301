"""Small widgets: a panel view (any registered panel), the broker table, the
consumer-group table and the header every screen shows."""

from console.tui.widgets.broker_table import BrokerChosen, BrokerTable
from console.tui.widgets.group_table import GroupChosen, GroupTable
from console.tui.widgets.panel_view import PanelView
from console.tui.widgets.title_header import TitleHeader

__all__ = ["BrokerChosen", "BrokerTable", "GroupChosen", "GroupTable", "PanelView", "TitleHeader"]
