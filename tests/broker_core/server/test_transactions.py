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


def _one_half(tmp_path, small_config):
    """A check service on a manual clock with one half of group "pay" pending."""
    clock = ManualClock(1_000.0)
    store = MessageStore(tmp_path / "s", small_config(clock=clock))
    tx = TxService(store, TxTable(tmp_path / "tx.json"), lambda *a: None,
                   lambda: int(clock() * 1000), check_after_s=6.0, interval_s=6.0)
    half(store)
    tx.catch_up()
    return clock, store, tx


def _ask_every(tx, clock, poll_s: float, seconds: float, poll_said: float | None) -> list[int]:
    """A producer asking every `poll_s` (saying `poll_said`) for `seconds`, the broker's
    pass run at each time it is armed for in between: the checks handed to the producer."""
    handed, ask_at, end = [], clock() + poll_s, clock() + seconds
    while ask_at <= end:
        while (due := tx.next_due_ms()) is not None and due <= ask_at * 1000:
            clock.t = max(clock.t, (due + 0.5) / 1000)  # (the wall clock reads whole ms)
            tx.run_once()
        clock.t = ask_at
        handed += [h.checks for h in tx.checks_for("pay", poll_said)]
        ask_at += poll_s
    return handed


def test_a_producer_asking_every_5_s_is_handed_every_check_none_spent_between_its_asks(
        tmp_path, small_config):
    clock, store, tx = _one_half(tmp_path, small_config)
    try:
        # it waits 5 s between asks, and asking takes a while (four brokers in turn): it
        # was taken for gone between its asks, each check spent unseen, the half rolled
        # back after its 15th. It says how often it asks now.
        assert _ask_every(tx, clock, 5.05, 61.0, poll_said=5.0) == [1, 2, 3, 4, 5, 6]
        assert tx.listing()[0]["producer_alive"]
        clock.advance(2 * 5.0 + 0.01)  # it missed two asks: gone, its checks counted made
        tx.run_once()
        assert not tx.listing()[0]["producer_alive"]
        assert tx.listing()[0]["checks"] == 7
    finally:
        store.close()


def test_a_producer_that_does_not_say_how_often_it_asks_is_gone_after_5_s(tmp_path,
                                                                         small_config):
    clock, store, tx = _one_half(tmp_path, small_config)
    try:
        assert _ask_every(tx, clock, 1.0, 20.0, poll_said=None) == [1, 2, 3]  # at 6, 12, 18 s
        clock.advance(PRODUCER_ALIVE_S + 0.01)
        tx.run_once()
        assert not tx.listing()[0]["producer_alive"]
    finally:
        store.close()
