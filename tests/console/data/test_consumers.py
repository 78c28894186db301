"""Consumer groups and flow control in the ClusterState: per-broker verdicts
(made by the broker's own BacklogEvaluator on an injected clock) merged into
one row per group, slaves not counted twice, lag history kept, refusal counts
turned into rates, and the alerts they raise."""

from __future__ import annotations

import pytest

from broker_core.observe.backlog import BacklogEvaluator
from broker_core.observe.stats_doc import BrokerStats
from console.data.consumers import TREND_S, trend_arrow
from console.data.state import BrokerSample, build_state


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def judged(series: dict[tuple[str, str, int], list[tuple[int, int]]], alive=(),
           heard_s: float = 0.0) -> dict:
    """A broker's `consumers` report after one sample a second of each queue's
    (committed, end) series (one group per queue: the end is the queue's); groups in
    `alive` heartbeat every second."""
    clock = Clock()
    ev = BacklogEvaluator(clock)
    steps = max(len(v) for v in series.values())
    for i in range(steps):
        for group in alive:
            ev.heard(group)
        committed = {k: v[min(i, len(v) - 1)][0] for k, v in series.items()}
        ends = {(k[1], k[2]): v[min(i, len(v) - 1)][1] for k, v in series.items()}
        ev.sample(committed, lambda t, q, ends=ends: ends[(t, q)])
        clock.t += 1.0
    clock.t += heard_s
    return ev.report()


def doc(name: str, consumers: dict | None = None, time: float = 1000.0, flow: dict | None = None,
        role: str | None = None) -> dict:
    d = {"broker": name, "time": time, "consumers": consumers or {}, "flow": flow or {}}
    if role:
        d["ha"] = {"group": "g1", "role": role, "epoch": 1}
    return d


def sample(d: dict, key: str | None = None) -> BrokerSample:
    return BrokerSample(key or d["broker"], d["broker"], BrokerStats.from_dict(d))


def moving(n: int = 12, rate: int = 10, lag: int = 0) -> list[tuple[int, int]]:
    return [(i * rate, i * rate + lag) for i in range(n)]


def stuck(n: int = 12, at: int = 50, rate: int = 10) -> list[tuple[int, int]]:
    return [(at, at + i * rate) for i in range(n)]


def test_status_is_the_worst_broker_and_figures_are_summed():
    b1 = judged({("fast", "orders", 0): moving(), ("slow", "orders", 1): stuck()},
                alive=("fast", "slow"))
    b2 = judged({("fast", "orders", 0): moving(), ("slow", "orders", 1): moving(lag=30)},
                alive=("fast", "slow"))
    state = build_state([sample(doc("broker-1", b1)), sample(doc("broker-2", b2))], now=1)
    assert [g.name for g in state.consumers] == ["slow", "fast"]  # worst first
    slow = state.group("slow")
    assert slow.status == "STALLED" and b2["slow"]["status"] == "OK"
    assert slow.lag == b1["slow"]["lag"] + b2["slow"]["lag"] == 110 + 30
    assert slow.brokers == ("broker-1", "broker-2") and slow.topics == ("orders",)
    assert slow.consume_per_s == pytest.approx(0 + 10) and slow.produce_per_s == pytest.approx(20)
    assert slow.drain_s is None  # consumes 10/s of 20/s written: not catching up
    assert [(q.broker, q.status) for q in slow.queues_not_ok()] == [("broker-1", "STALLED")]
    fast = state.group("fast")
    assert fast.status == "OK" and fast.lag == 0 and fast.drain_s == 0.0


def test_drain_time_is_recomputed_from_the_sums():
    # broker-1: lag 200 shrinking by 10/s (consumes 20/s of 10/s written); broker-2: lag 50,
    # steady: 140 left at a net 10/s
    catching = [(i * 20, 200 + i * 10) for i in range(12)]
    b1 = judged({("g", "t", 0): catching}, alive=("g",))
    b2 = judged({("g", "t", 1): moving(lag=50)}, alive=("g",))
    g = build_state([sample(doc("broker-1", b1)), sample(doc("broker-2", b2))], now=1).group("g")
    assert g.consume_per_s == pytest.approx(30) and g.produce_per_s == pytest.approx(20)
    assert g.lag == 140 and g.drain_s == pytest.approx(14)


def test_a_stopped_group_and_its_alert():
    report = judged({("gone", "t", 0): stuck(n=3)}, heard_s=20.0)
    state = build_state([sample(doc("broker-1", report))], now=1)
    g = state.group("gone")
    assert g.status == "STOPPED" and g.idle_s == pytest.approx(23.0)
    alert = next(a for a in state.active_alerts if a.key == "consumer:gone")
    assert alert.severity == "critical"
    assert "consumer group gone STOPPED" in alert.message and "t@broker-1" in alert.message


def test_warning_alert_is_lower_severity_and_clears_when_ok():
    growing = [(i * 5, i * 10) for i in range(12)]
    s1 = build_state([sample(doc("broker-1", judged({("g", "t", 0): growing}, alive="g")))],
                     now=1)
    alert = next(a for a in s1.active_alerts if a.key == "consumer:g")
    assert s1.group("g").status == "WARNING" and alert.severity == "warning"
    assert "lag growing" in alert.message and trend_arrow(s1.group("g")) == "↑"
    s2 = build_state([sample(doc("broker-1", judged({("g", "t", 0): moving()}, alive="g")))],
                     prev=s1, now=2)
    assert not s2.active_alerts and s2.alerts.entries[-1].cleared


def test_slaves_are_not_counted_and_a_down_broker_drops_out():
    report = judged({("g", "t", 0): moving(lag=7)}, alive="g")
    master, slave = doc("b-master", report, role="MASTER"), doc("b-slave", report, role="SLAVE")
    state = build_state([sample(master), sample(slave)], now=1)
    assert state.group("g").lag == 7 and state.group("g").brokers == ("b-master",)
    down = [sample(master), BrokerSample("b-slave", "b-slave", None, "refused")]
    s = build_state(down, now=1, down_after=1)
    assert s.group("g").lag == 7
    gone = build_state([BrokerSample("b-master", "b-master", None, "refused")], now=1)
    assert gone.consumers == ()


def test_lag_history_is_kept_for_the_trend_and_cut_to_minutes():
    state = None
    for t in range(0, 400, 10):
        report = judged({("g", "t", 0): moving(lag=t)}, alive="g")
        state = build_state([sample(doc("broker-1", report, time=t))], prev=state, now=t)
    hist = state.group("g").history
    assert hist[-1] == (390, 390) and hist[0][0] > 390 - TREND_S
    assert [lag for _, lag in hist] == sorted(lag for _, lag in hist)
    again = build_state([sample(doc("broker-1", report, time=390))], prev=state, now=390)
    assert again.group("g").history == hist  # a replayed poll adds no point


def flow(count: int, quotas=()) -> dict:
    return {"quotas": list(quotas), "throttled_total": count,
            "throttled": [{"topic": "orders", "group": "flood", "count": count}] if count else []}


QUOTA = {"kind": "topic", "target": "orders", "rate": 100.0, "burst": 10.0, "warmup_s": 30.0,
         "buckets": [{"name": "orders", "rate_now": 40.0}]}


def test_throttled_counts_become_rates_per_broker_and_topic():
    s1 = build_state([sample(doc("broker-1", time=10, flow=flow(100, [QUOTA]))),
                      sample(doc("broker-2", time=10, flow=flow(0)))], now=10)
    assert s1.flow.throttled[0].per_s is None and s1.flow.total == 100  # nothing to compare
    assert s1.flow.quotas[0].rate_now == (("orders", 40.0),)  # still warming up
    assert not [a for a in s1.active_alerts if a.key.startswith("throttled:")]
    s2 = build_state([sample(doc("broker-1", time=12, flow=flow(300, [QUOTA]))),
                      sample(doc("broker-2", time=12, flow=flow(50)))], prev=s1, now=12)
    rows = {t.broker: t for t in s2.flow.throttled}
    assert rows["broker-1"].per_s == pytest.approx(100) and rows["broker-2"].per_s == 25
    assert s2.flow.total == 350 and s2.flow.per_s == pytest.approx(125)
    assert s2.flow.by_topic() == [("orders", "flood", 350, pytest.approx(125))]
    alert = next(a for a in s2.active_alerts if a.key == "throttled:orders:flood")
    assert alert.severity == "info"
    assert alert.message == ("flow control: topic orders from group flood throttled 125/s "
                             "(350 refused) on broker-1, broker-2")
    # the same answer again (a stale poll) keeps the rate; a restart (count down) has none
    s3 = build_state([sample(doc("broker-1", time=12, flow=flow(300))),
                      sample(doc("broker-2", time=13, flow=flow(5)))], prev=s2, now=13)
    rows = {t.broker: t for t in s3.flow.throttled}
    assert rows["broker-1"].per_s == pytest.approx(100) and rows["broker-2"].per_s is None
    s4 = build_state([sample(doc("broker-1", time=14, flow=flow(300)))], prev=s3, now=14)
    assert s4.flow.per_s == 0 and not [a for a in s4.active_alerts
                                       if a.key.startswith("throttled:")]


def test_malformed_consumer_and_flow_documents_are_survived():
    bad = {"broker": "b", "time": 1, "consumers": {"g": {"status": "ODD", "lag": "x",
                                                         "queues": [1, {"topic": 3}]}},
           "flow": {"quotas": [{"rate": "fast"}, 7], "throttled": [{"count": None}, "x"]}}
    state = build_state([sample(bad)], now=1)
    g = state.group("g")
    assert g.status == "OK" and g.lag == 0 and g.queues[0].topic == "3"
    assert state.flow.quotas[0].rate is None and state.flow.throttled == ()


def test_an_offset_reset_reads_no_negative_rate_and_not_keeping_up():
    from console.data.consumers import lag_growing
    from console.tui.format import rate
    from console.tui.panels.consumer_queues import _head
    from console.tui.panels.consumers import drain_cell

    # consuming 100/s as fast as written, then the committed offset is reset 3,000 back
    reset = [(5000 + 100 * i, 5000 + 100 * i) for i in range(8)]
    reset += [(2800 + 100 * i, 5800 + 100 * i) for i in range(4)]
    report = judged({("billing", "orders", 0): reset}, alive=("billing",))
    g = build_state([sample(doc("broker-1", report))], now=1).group("billing")
    assert g.consume_per_s == pytest.approx(100) and g.lag == 3000
    assert g.status == "OK" and lag_growing(g)
    head = _head(g).plain
    assert "out 100/s" in head and "-" not in rate(g.consume_per_s)
    assert drain_cell(g).plain == "lag growing" and "keeping up" not in head
    # a broker from before the fix sent the net (negative) move: summed as 0, not below
    old = {"billing": dict(report["billing"], consume_per_s=-291.0)}
    g = build_state([sample(doc("broker-1", old))], now=1).group("billing")
    assert g.consume_per_s == 0.0 and "out 0/s" in _head(g).plain


def test_a_group_committing_with_transactions_is_marked_exactly_once():
    """The broker says which groups' offsets moved with a transform's transactions; the
    console's row and the groups table say so."""
    from console.tui.panels.consumers import COLUMNS

    clock = Clock()
    ev = BacklogEvaluator(clock)
    for i in range(3):
        ev.sample({("ledger", "paid", 0): i, ("billing", "paid", 0): i},
                  lambda t, q: 10)
        clock.t += 1.0
    report = ev.report(exactly_once={"ledger": 12})
    assert report["ledger"]["exactly_once"] is True and "exactly_once" not in report["billing"]
    state = build_state([sample(doc("broker-1", report))], now=1)
    assert state.group("ledger").exactly_once and not state.group("billing").exactly_once
    name = next(c for c in COLUMNS if c.label == "group")
    assert name.cell(state.group("ledger")).plain == "ledger exactly once"
    assert name.cell(state.group("billing")).plain == "billing"
