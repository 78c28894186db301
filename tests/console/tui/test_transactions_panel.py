"""The groups screen's transactions and queue-lock panels from brokers' /stats: halves
pending with the oldest in red past a minute, rollbacks by who decided; each orderly
client's queues on one line; a slave's copies not counted twice (delayed messages
per broker, the master's only while it answers)."""

from __future__ import annotations

from rich.console import Console

from broker_core.observe.stats_doc import BrokerStats
from console.data.state import BrokerSample, build_state
from console.tui.panels import render_panel

TX = {"pending": 2, "oldest_pending_s": 75.0, "halves_total": 120, "committed_total": 100,
      "checks_total": 9, "rolled_back": {"producer": 17, "checks-exhausted": 1}}
LOCKS = {"held": 3, "granted_total": 5, "holders": [
    {"group": "ledger", "topic": "paid", "queue": q, "client_id": "host-1-abc",
     "since": 1000.0, "lease_left_s": 18.0} for q in (0, 2, 3)]}


def shown(panel: str, docs: list[dict]) -> str:
    state = build_state([BrokerSample(d["broker"], d["broker"], BrokerStats.from_dict(d))
                         for d in docs], now=1)
    console = Console(width=150, record=True)
    console.print(render_panel(panel, state))
    return console.export_text()


def test_halves_and_rollbacks_per_broker():
    out = shown("transactions", [{"broker": "broker-1", "time": 1.0, "transactions": TX},
                                 {"broker": "broker-2", "time": 1.0, "transactions": {}}])
    assert "broker-1" in out and "broker-2" not in out, out
    assert "75 s" in out and "checks-exhausted 1, producer 17" in out, out


def test_each_orderly_client_holds_its_queues_on_one_line():
    out = shown("queue_locks", [{"broker": "broker-1", "time": 1.0, "locks": LOCKS}])
    assert "ledger  paid   host-1-abc  broker-1  0 2 3" in out, out
    assert "5 lock changes" in out
    assert "no orderly consumer" in shown("queue_locks", [{"broker": "b", "time": 1.0}])


def test_delayed_messages_of_a_slave_are_its_masters_copy_shown_only_without_it():
    def doc(name: str, role: str, pending: int) -> dict:
        return {"broker": name, "time": 1.0, "ha": {"group": "g1", "role": role, "epoch": 1},
                "delayed": {"pending": {"5s": pending}, "pending_total": pending,
                            "overdue_s": 0.0}}

    master, slave = doc("g1-a", "MASTER", 10), doc("g1-b", "SLAVE", 13)
    out = shown("delayed", [master, slave])
    assert "g1-a" in out and "g1-b" not in out, out
    state = build_state([BrokerSample("g1-a", "g1-a", None, "connection refused"),
                         BrokerSample("g1-b", "g1-b", BrokerStats.from_dict(slave))], now=1)
    console = Console(width=150, record=True)
    console.print(render_panel("delayed", state))
    out = console.export_text()
    assert "g1-b" in out and "13" in out, out
