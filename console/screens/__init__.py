"""Screens: the cluster table, one broker, the fuse, the host, alerts, help."""

from console.screens.alerts import AlertsScreen
from console.screens.base import StateScreen
from console.screens.broker import BrokerScreen
from console.screens.cluster import ClusterScreen
from console.screens.fuse import FuseScreen
from console.screens.help import HelpScreen
from console.screens.host import HostScreen

__all__ = ["AlertsScreen", "BrokerScreen", "ClusterScreen", "FuseScreen", "HelpScreen",
           "HostScreen", "StateScreen"]
