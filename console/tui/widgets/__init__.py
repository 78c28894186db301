"""Small widgets: a panel view (any registered panel), the broker table and the
consumer-group table."""

from console.tui.widgets.broker_table import BrokerChosen, BrokerTable
from console.tui.widgets.group_table import GroupChosen, GroupTable
from console.tui.widgets.panel_view import PanelView

__all__ = ["BrokerChosen", "BrokerTable", "GroupChosen", "GroupTable", "PanelView"]
