"""Check-backs on a manual clock against a real store: when the broker's check pass
has something to do next (it is armed for that time, never polled)."""

from __future__ import annotations

from broker_core import protocol as p
from broker_core.protocol.delay import PROP_REAL_QID, PROP_REAL_TOPIC
from broker_core.protocol.transactions import HALF_TOPIC, PROP_TX_HALF
from broker_core.server.transactions import PRODUCER_ALIVE_S, TxService
from broker_core.server.tx_table import TxTable
from broker_core.store import MessageStore
from tests.clock import ManualClock


def half(store: MessageStore, group: str = "pay") -> None:
    store.put(HALF_TOPIC, 0, b"order", properties={p.PRODUCER_GROUP: group, PROP_TX_HALF: "true",
                                                     PROP_REAL_TOPIC: "orders", PROP_REAL_QID: "0"})


def test_the_pass_is_due_when_a_half_falls_due_or_its_producers_go_quiet(tmp_path,
                                                                          small_config):
    clock = ManualClock(1_000.0)
    store = MessageStore(tmp_path / "s", small_config(clock=clock))
    try:
        tx = TxService(store, TxTable(tmp_path / "tx.json"), lambda *a: None,
                       lambda: int(clock() * 1000), check_after_s=6.0, interval_s=6.0)
        tx.catch_up()
        assert tx.next_due_ms() is None  # nothing pending: nothing armed
        half(store)
        tx.catch_up()
        assert tx.next_due_ms() == 1_006_000  # its first check
        clock.advance(6.0)
        assert [h.offset for h in tx.checks_for("pay")] == [0]  # its producer asked
        assert tx.next_due_ms() == 1_012_000  # the next check
        clock.advance(5.0)
        assert tx.checks_for("pay") == []  # its producer polls: not due yet
        clock.advance(1.0)  # due, and its producer asked a second ago: nothing for the
        # broker to do until that producer is taken for gone (not a pass at every turn)
        assert tx.run_once() == []
        assert tx.next_due_ms() == 1_011_000 + PRODUCER_ALIVE_S * 1000 + 1
        clock.advance(PRODUCER_ALIVE_S)
        tx.run_once()  # nobody asked: the check counts as made
        assert tx.next_due_ms() == int(clock() * 1000) + 6_000
    finally:
        store.close()
