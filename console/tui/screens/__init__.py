"""Screens: the cluster table, one broker, consumer groups and one group, the
fuse, the host, alerts, help, message trace, a group's offsets."""

from console.tui.screens.alerts import AlertsScreen
from console.tui.screens.base import StateScreen
from console.tui.screens.broker import BrokerScreen
from console.tui.screens.cluster import ClusterScreen
from console.tui.screens.consumer_group import ConsumerGroupScreen
from console.tui.screens.consumers import ConsumersScreen
from console.tui.screens.fuse import FuseScreen
from console.tui.screens.group_offsets import GroupOffsetsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.host import HostScreen
from console.tui.screens.trace import TraceScreen

__all__ = ["AlertsScreen", "BrokerScreen", "ClusterScreen", "ConsumerGroupScreen",
           "ConsumersScreen", "FuseScreen", "GroupOffsetsScreen", "HelpScreen", "HostScreen", "StateScreen",
           "TraceScreen"]
