"""Small widgets: a panel view (any registered panel) and the broker table."""

from console.tui.widgets.broker_table import BrokerChosen, BrokerTable
from console.tui.widgets.panel_view import PanelView

__all__ = ["BrokerChosen", "BrokerTable", "PanelView"]
