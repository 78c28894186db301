"""The consumer-groups screen against a real 2-broker cluster: a producer
writes, group `billing` consumes and commits, group `audit` consumed once and
then only heartbeats (alive, offsets still). Within a few seconds the screen
lists both, `audit` STALLED with its lag, `billing` OK; Enter shows audit's
queues on both brokers; the cluster table's "cons lag" and "out" are real."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp
from console.tui.screens import ConsumerGroupScreen, ConsumersScreen, GroupOffsetsScreen
from console.tui.widgets import BrokerTable, GroupTable, PanelView
from tests.console.tui.test_app_live import wait_for
from tests.console.tui.test_consumers_screen import text

pytestmark = pytest.mark.integration  # real broker processes
TOPIC = "orders"


def drain(consumer, want: int, timeout: float = 10.0) -> None:
    """Consume `want` messages and commit them (every queue gets a committed offset)."""
    got, deadline = 0, time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        got += len(consumer.poll(256, timeout=0.2))
    consumer.commit()
    assert got >= want, f"{consumer.group} consumed {got} of {want}"


def traffic(producer, billing, audit, stop: threading.Event) -> None:
    """~100 msgs/s written; billing keeps up and commits; audit only heartbeats."""
    next_beat = 0.0
    while not stop.is_set():
        for _ in range(10):
            producer.send(TOPIC, b"x" * 64)
        while billing.poll(256, timeout=0.0):  # all of it: its lag stays near 0 (OK)
            pass
        billing.commit()
        if time.monotonic() >= next_beat:
            audit.heartbeat()
            next_beat = time.monotonic() + 1.0
        stop.wait(0.1)


def test_stalled_group_shows_on_the_groups_screen(cluster_factory):
    from broker_core.client.consumer import Consumer
    from broker_core.client.producer import Producer

    cluster = cluster_factory(n=2)
    producer = Producer(cluster.file.addrs, fuse=False)
    for _ in range(200):
        producer.send(TOPIC, b"x" * 64)
    billing = Consumer("billing", TOPIC, cluster.file.addrs)
    audit = Consumer("audit", TOPIC, cluster.file.addrs)
    drain(billing, 200)
    drain(audit, 200)
    stop = threading.Event()
    worker = threading.Thread(target=traffic, args=(producer, billing, audit, stop), daemon=True)
    worker.start()
    try:
        asyncio.run(groups_screen(cluster))
    finally:
        stop.set()
        worker.join(5)
        billing.close()
        audit.close()
        producer.close()


async def groups_screen(cluster) -> None:
    brokers = [(b.name, b.http) for b in cluster.file.brokers]
    app = FloodgateApp(ConsoleConfig(brokers=brokers, refresh=0.25, timeout=0.5).validate())
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, ConsumersScreen)
        table = app.screen.query_one(GroupTable)

        def judged() -> bool:
            audit, billing = app.state.group("audit"), app.state.group("billing")
            return audit is not None and billing is not None and audit.status == "STALLED" \
                and billing.status == "OK" and table.groups == ["audit", "billing"] \
                and audit.brokers == ("broker-1", "broker-2")

        # the broker samples once a second and calls STALLED after 2 still samples; each
        # broker on its own clock, and a poll of one can time out on a busy host: the
        # screen may judge the group from one broker for a poll before both report it
        await wait_for(pilot, judged, timeout=10)
        audit = app.state.group("audit")
        assert audit.lag > 0 and audit.brokers == ("broker-1", "broker-2")
        row = [c.plain for c in table.get_row("audit")]
        assert row[1] == "STALLED" and row[2] == f"{audit.lag:,}"
        assert "consumer:audit" in {a.key for a in app.state.active_alerts}

        # the cursor follows its group across refreshes: it stays on billing if billing
        # was the first row before audit stalled (worst first); an operator moves it
        table.move_cursor(row=table.groups.index("audit"), animate=False)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsumerGroupScreen))
        queues = text(app.screen.query_one("#consumer-queues", PanelView))
        assert "audit  STALLED" in queues
        assert {ln.split()[0] for ln in queues.splitlines() if ln.startswith("broker-")} == \
            {"broker-1", "broker-2"}

        await pilot.press("o")  # its offsets, asked of the brokers' admin API
        await wait_for(pilot, lambda: isinstance(app.screen, GroupOffsetsScreen)
                       and app.screen.view is not None)
        view = app.screen.view
        assert view.group == "audit" and not view.errors
        assert {q["broker"] for q in view.queues} == {"broker-1", "broker-2"}
        assert view.lag > 0 and all(q["committed"] >= 0 for q in view.queues)
        shown = text(app.screen.query_one("#offsets-table"))
        assert f"lag {view.lag:,} over {len(view.queues)} queue(s)" in shown
        await pilot.press("escape")

        await pilot.press("c")  # the cluster table: its consumer columns are real now
        await pilot.pause()
        bt = app.screen.query_one(BrokerTable)
        await wait_for(pilot, lambda: sum(b.consumer_lag or 0 for b in app.state.brokers) > 0
                       and sum(b.out_per_s or 0 for b in app.state.brokers) > 0)
        labels = [c.label for c in bt.columns]
        lag_col, out_col = labels.index("cons lag"), labels.index("out")
        cells = [(bt.cell_text(k, lag_col), bt.cell_text(k, out_col)) for k in bt.visible_keys]
        assert any(lag not in ("0", "-") for lag, _ in cells)
        assert any(out not in ("0/s", "-") for _, out in cells)
