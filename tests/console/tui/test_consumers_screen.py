"""The consumer-groups screen (`g`) on recorded-style /stats: groups worst
first with their status, Enter opens a group's queues, `[`/`]` step through
groups, and the flow-control panel lists quotas and throttled sends; the
cluster header sums them up."""

from __future__ import annotations

import asyncio
import json

from console.config import ConsoleConfig
from console.tui.app import FloodgateApp
from console.tui.panels.consumers import COLUMNS
from console.tui.screens import ClusterScreen, ConsumerGroupScreen, ConsumersScreen
from console.tui.widgets import GroupTable, PanelView


def group(status: str, lag: int, queues: list[dict], **figures) -> dict:
    return {"status": status, "lag": lag, "trend_per_s": figures.get("trend", 0.0),
            "consume_per_s": figures.get("consume", 100.0),
            "produce_per_s": figures.get("produce", 100.0),
            "drain_s": figures.get("drain"), "idle_s": figures.get("idle", 0.4),
            "topics": sorted({q["topic"] for q in queues}), "queues": queues}


def queue(topic: str, qid: int, committed: int, end: int, status: str = "OK") -> dict:
    return {"topic": topic, "queue": qid, "committed": committed, "end": end,
            "lag": end - committed, "status": status, "drain_s": None}


BROKER_1 = {
    "broker": "broker-1", "time": 1_700_000_000.0,
    "consumers": {
        "billing": group("OK", 0, [queue("orders", 0, 500, 500)], drain=0.0),
        "audit": group("STALLED", 1200, [queue("orders", 0, 100, 500, "STALLED"),
                                         queue("orders", 1, 200, 1000, "STALLED")],
                       consume=0.0, idle=0.8),
    },
    "flow": {"quotas": [{"kind": "topic", "target": "orders", "rate": 500.0, "burst": 50.0,
                         "warmup_s": 0.0, "buckets": [{"name": "orders", "rate_now": 500.0}]}],
             "throttled": [{"topic": "orders", "group": "flood", "count": 4321}],
             "throttled_total": 4321},
}
BROKER_2 = {
    "broker": "broker-2", "time": 1_700_000_000.0,
    "consumers": {"billing": group("WARNING", 40, [queue("orders", 0, 960, 1000, "WARNING")],
                                   trend=5.0, consume=90.0)},
}


def replay_app(tmp_path) -> FloodgateApp:
    (tmp_path / "brokers").mkdir()
    for doc in (BROKER_1, BROKER_2):
        (tmp_path / "brokers" / f"{doc['broker']}.json").write_text(json.dumps(doc))
    return FloodgateApp(ConsoleConfig(replay=tmp_path, refresh=3600).validate())


async def ready(pilot) -> None:
    for _ in range(200):
        if pilot.app.state is not None:
            break
        await pilot.pause(0.05)
    await pilot.pause()


def text(view: PanelView, width: int = 150) -> str:
    from rich.console import Console

    console = Console(width=width, record=True)
    console.print(view.content)
    return console.export_text()


def test_groups_worst_first_drill_down_and_back(tmp_path):
    async def go():
        app = replay_app(tmp_path)
        async with app.run_test(size=(150, 40)) as pilot:
            await ready(pilot)
            cluster = text(app.screen.query_one("#summary", PanelView))
            assert "2 consumer groups: 1 STALLED 1 WARNING, lag 1,240" in cluster
            assert "(g: groups)" not in cluster  # `status` prints it too: the footer says g
            await pilot.press("g")
            await pilot.pause()
            assert isinstance(app.screen, ConsumersScreen)
            table = app.screen.query_one(GroupTable)
            assert table.groups == ["audit", "billing"]  # STALLED before WARNING
            labels = [c.label for c in COLUMNS]
            row = dict(zip(labels, (c.plain for c in table.get_row("audit")), strict=True))
            assert (row["group"], row["status"], row["lag"], row["drain"]) == \
                ("audit", "STALLED", "1,200", "never")
            billing = dict(zip(labels, (c.plain for c in table.get_row("billing")), strict=True))
            # worst of broker-1's OK and broker-2's WARNING; lag summed; 2 brokers report it
            assert (billing["status"], billing["lag"], billing["brokers"]) == ("WARNING", "40", "2")
            assert billing["dead"] == billing["retry"] == "0"  # nothing sent back
            assert "↑" in billing["trend"]
            line = text(app.screen.query_one("#consumers-line", PanelView))
            assert "1 STALLED 1 WARNING │ lag 1,240 │ quotas 1 │ throttled 4,321 in all" in line

            flow = text(app.screen.query_one("#throttling", PanelView))
            assert "quotas in force" in flow and "topic  orders" in flow
            assert "broker-1  orders  flood" in flow and "4,321" in flow

            await pilot.press("down", "enter")  # billing
            await pilot.pause()
            assert isinstance(app.screen, ConsumerGroupScreen) and app.screen.group == "billing"
            queues = text(app.screen.query_one("#consumer-queues", PanelView))
            assert "billing  WARNING  lag 40" in queues
            lines = [ln.split() for ln in queues.splitlines() if ln.startswith("broker-")]
            # worst first: broker-2's growing queue above broker-1's caught-up one
            assert lines[0][:7] == ["broker-2", "orders", "0", "960", "1,000", "40", "WARNING"]
            assert lines[1][:7] == ["broker-1", "orders", "0", "500", "500", "0", "OK"]
            await pilot.press("right_square_bracket")
            await pilot.pause()
            assert app.screen.group == "audit"
            assert "audit  STALLED" in text(app.screen.query_one("#consumer-queues", PanelView))
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, ConsumersScreen)
            await pilot.press("c")
            await pilot.pause()
            assert isinstance(app.screen, ClusterScreen)
    asyncio.run(go())


def test_screen_without_groups_or_quotas(tmp_path):
    (tmp_path / "brokers").mkdir()
    (tmp_path / "brokers" / "b.json").write_text(json.dumps({"broker": "b", "time": 1.0}))

    async def go():
        app = FloodgateApp(ConsoleConfig(replay=tmp_path, refresh=3600).validate())
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot)
            assert "consumer group" not in text(app.screen.query_one("#summary", PanelView))
            await pilot.press("g")
            await pilot.pause()
            assert app.screen.query_one(GroupTable).groups == []
            assert "no quota in force" in text(app.screen.query_one("#throttling", PanelView))
            await pilot.press("enter")  # nothing to open
            await pilot.pause()
            assert isinstance(app.screen, ConsumersScreen)
    asyncio.run(go())


def test_snapshot_of_the_groups_screen(tmp_path, snap_compare):
    async def before(pilot) -> None:
        await ready(pilot)
        await pilot.press("g")
        await pilot.pause()

    assert snap_compare(replay_app(tmp_path), terminal_size=(150, 44), run_before=before)


def test_one_quota_row_per_quota_with_the_brokers_enforcing_it():
    from rich.console import Console

    from broker_core.observe.stats_doc import BrokerStats
    from console.data.state import BrokerSample, build_state
    from console.tui.panels import render_panel

    quota = BROKER_1["flow"]["quotas"][0]
    docs = [{"broker": f"broker-{i}", "time": 1.0, "flow": {"quotas": [quota]}}
            for i in (1, 2, 3)]
    docs[2]["flow"] = {}  # broker-3 lacks it: the row must say who has it

    def shown(docs) -> str:
        state = build_state([BrokerSample(d["broker"], d["broker"], BrokerStats.from_dict(d))
                             for d in docs], now=1)
        console = Console(width=150, record=True)
        console.print(render_panel("throttling", state))
        return console.export_text()

    assert "topic  orders  500/s     50        -  broker-1, broker-2" in shown(docs)
    assert "topic  orders  500/s     50        -  all 2" in shown(docs[:2])


def test_a_watched_producers_throttling_is_shown_under_the_brokers():
    from rich.console import Console

    from broker_core.observe.stats_doc import BrokerStats, ProducerStats
    from console.data.state import BrokerSample, ProducerSample, build_state
    from console.tui.panels import render_panel

    quota = BROKER_1["flow"]["quotas"][0]
    broker = {"broker": "broker-1", "time": 1.0, "flow": {"quotas": [quota]}}
    producer = ProducerStats.from_dict({"producer": "orders-app", "sends": {
        "flow_control": 1234, "flow_control_gave_up": 5, "backoff_s": 12.5}})
    state = build_state([BrokerSample("broker-1", "broker-1", BrokerStats.from_dict(broker))],
                        [ProducerSample("p", producer)], now=1)
    console = Console(width=150, record=True)
    console.print(render_panel("throttling", state))
    assert "producer orders-app: 1,234 attempts throttled, 5 sends gave up" in \
        console.export_text()
