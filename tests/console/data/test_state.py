"""ClusterState from decoded /stats: states, DOWN after two misses, the fuse's
ISOLATED, SLA alerts as edges, history kept for 5 minutes, bad data survived."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from broker_core.observe.stats_doc import BrokerStats, ProducerStats
from console.data.histories import merge_histograms, merge_history
from console.data.state import BrokerSample, ProducerSample, build_state
from heatmap import LatencyHistogram

DATA = Path(__file__).parents[1] / "recorded" / "demo"


def recorded(name: str) -> dict:
    return json.loads((DATA / "brokers" / f"{name}.json").read_text())


def doc(name="broker-1", p99=0.0004, mx=0.002, mean=0.0001, ts=1000, hist_ts=()):
    h = LatencyHistogram()
    h.record(0.0003)
    send10 = {"count": 100, "msgs_per_s": 10.0, "errors": 0, "over_20ms": 0, "mean": mean,
              "p50": 0.0001, "p99": p99, "p999": p99, "max": mx}
    return {"broker": name, "time": ts, "ops": {"send": {"10s": send10}},
            "history": {"send": [{"ts": t, **h.to_dict()} for t in hist_ts]},
            "disk": {"used_ratio": 0.5}, "flush_lag_bytes": 10, "consumer_lag": {"g": 3}}


def sample(d=None, error=None, key="h1", name="broker-1"):
    """What a source hands over: a JSON object decoded once, anything else no answer."""
    return BrokerSample(key, name, BrokerStats.from_dict(d) if isinstance(d, Mapping) else None,
                        error)


def producer(doc):
    return ProducerSample("p", ProducerStats.from_dict(doc))


def test_up_slow_from_p99_or_max_over_sla():
    s = build_state([sample(doc()), sample(doc("broker-2", mx=0.05), key="h2"),
                     sample(doc("broker-3", p99=0.03, mx=0.03), key="h3")], now=1)
    assert [b.state for b in s.brokers] == ["UP", "SLOW", "SLOW"]
    assert s.brokers[1].reason == "send max 50.0 ms > 20 ms (10 s)"
    assert "p99 30.0 ms" in s.brokers[2].reason
    assert s.brokers[0].consumer_lag == 3 and s.brokers[0].disk_used_ratio == 0.5
    assert not s.summary.healthy


def test_down_only_after_two_missed_polls_and_back_up():
    s1 = build_state([sample(doc())], now=1)
    s2 = build_state([sample(None, "connection refused")], prev=s1, now=2)
    b = s2.brokers[0]
    assert b.state == "UP" and b.failures == 1 and "stale" in b.reason
    s3 = build_state([sample(None, "connection refused")], prev=s2, now=3)
    assert s3.brokers[0].state == "DOWN" and s3.brokers[0].reason == "connection refused"
    assert any(a.key == "down:broker-1" for a in s3.active_alerts)
    s4 = build_state([sample(doc())], prev=s3, now=4)
    assert s4.brokers[0].state == "UP" and not s4.active_alerts
    assert [a.cleared for a in s4.alerts.entries] == [False, True]
    assert [a.cleared for a in s4.alerts.since(s3.alerts)] == [True]
    assert s4.summary.availability == pytest.approx(2 / 4)



def test_availability_counts_groups_that_can_take_sends_not_brokers():
    """A replicated group serves while a member answers as its master: failed over to
    its slave, it serves in full with its old master dead; between the two it does not."""
    def member(name, role, key):
        return sample({**doc(name), "ha": {"group": "g1", "role": role, "epoch": 1}},
                      key=key, name=name)

    groups = {"g1-a": "g1", "g1-b": "g1"}
    single = sample(doc("solo"), key="h3", name="solo")
    dead = sample(None, "connection refused", key="h1", name="g1-a")
    s1 = build_state([dead, member("g1-b", "SLAVE", "h2"), single], now=1, groups=groups)
    assert s1.summary.availability == pytest.approx(1 / 2)  # g1 has no master: solo only
    assert [b.group for b in s1.brokers] == ["g1", "g1", None]  # the dead one's: the file's
    s2 = build_state([dead, member("g1-b", "MASTER", "h2"), single], prev=s1, now=2,
                     groups=groups)
    assert (s2.answered, s2.asked) == (3, 4)  # this poll: both serve, one broker dead
    s3 = build_state([member("g1-a", "SLAVE", "h1"), member("g1-b", "MASTER", "h2"), single],
                     prev=s2, now=3, groups=groups)
    assert s3.summary.availability == pytest.approx(5 / 6)

def test_never_seen_broker_is_down_at_once():
    s = build_state([sample(None, "timed out")], now=1)
    assert s.brokers[0].state == "DOWN" and s.brokers[0].reason == "timed out"


def test_isolated_when_a_producer_fuse_excludes_it():
    fuse = {"cap": 1, "excluded": ["broker-1"], "overflow": [],
            "isolated": [{"broker": "broker-1", "reason": "slow", "left_s": 30}]}
    s = build_state([sample(doc()), sample(doc("broker-2"), key="h2")],
                    [producer({"producer": "bench", "fuse": fuse})], now=1)
    assert [b.state for b in s.brokers] == ["ISOLATED", "UP"]
    assert s.brokers[0].reason == "fuse of bench: slow"
    assert s.summary.isolated == 1 and s.summary.cap == 1
    assert any(a.key == "cap:bench" for a in s.active_alerts)
    # with the evidence of its latest isolation, when the fuse's transitions hold it
    fuse["transitions"] = [
        {"broker": "broker-1", "event": "isolate", "reason": "error", "detail": "SYSTEM_BUSY"},
        {"broker": "broker-2", "event": "isolate", "reason": "slow", "detail": "a call of 9 s"},
        {"broker": "broker-1", "event": "release", "reason": "expired"},
        {"broker": "broker-1", "event": "isolate", "reason": "slow",
         "detail": "a call of 100.8 ms, the line 10.0 ms"}]
    s = build_state([sample(doc())], [producer({"producer": "bench", "fuse": fuse})], now=2)
    assert s.brokers[0].reason == "fuse of bench: slow, a call of 100.8 ms, the line 10.0 ms"


def test_a_broker_serving_as_overflow_is_up_and_says_why_the_fuse_names_it():
    """The fuse line said `group-2 slow, serving as overflow` while its row read UP, blank."""
    fuse = {"cap": 1, "excluded": ["broker-1"], "overflow": ["broker-2"],
            "isolated": [{"broker": "broker-1", "reason": "error", "left_s": 30},
                         {"broker": "broker-2", "reason": "slow", "left_s": 20,
                          "overflow": True}]}
    s = build_state([sample(doc()), sample(doc("broker-2"), key="h2")],
                    [producer({"producer": "bench", "fuse": fuse})], now=1)
    assert [(b.state, b.reason) for b in s.brokers] == [
        ("ISOLATED", "fuse of bench: error"),
        ("UP", "fuse of bench: slow, serving as overflow (cap full)")]


def test_down_beats_isolated():
    fuse = {"cap": 1, "excluded": ["broker-1"], "isolated": []}
    s = build_state([sample(None, "refused")], [producer({"fuse": fuse})], now=1)
    assert s.brokers[0].state == "DOWN"


def test_sla_alerts_raise_once_and_clear():
    s1 = build_state([sample(doc(mean=0.004, mx=0.03))], now=1)
    keys = {a.key for a in s1.active_alerts}
    assert keys == {"mean:broker-1", "max:broker-1"}
    s2 = build_state([sample(doc(mean=0.005, mx=0.04))], prev=s1, now=2)
    assert len(s2.alerts.entries) == 2  # still the same two breaches, not new ones
    s3 = build_state([sample(doc())], prev=s2, now=3)
    assert not s3.active_alerts and sum(a.cleared for a in s3.alerts.entries) == 2


@pytest.mark.parametrize("bad", [
    None, [], "x", {"broker": 3, "ops": "nope"}, {"ops": {"send": {"10s": {"p99": "slow"}}}},
    {"history": {"send": [{"ts": "x"}, 5, {"ts": 1, "buckets": "?"}]}, "consumer_lag": [1]},
    {"ops": {"send": {"10s": {"p50": float("inf"), "over_20ms": float("inf"),
                              "errors": float("nan")}}},
     "history": {"send": [{"ts": 1, "count": 1, "buckets": {"3": 1}, "min": [], "max": 1}]}},
])
def test_malformed_documents_do_not_raise(bad):
    s = build_state([sample(bad, None if bad else "empty")], now=1)
    assert s.brokers[0].state in ("UP", "DOWN")
    from console.tui.panels import PANELS

    for render in PANELS.values():
        render(s, "h1")  # every panel draws odd data without raising


def test_history_is_merged_by_second_and_kept_five_minutes():
    s = build_state([sample(doc(hist_ts=range(0, 200)))], now=1)
    s = build_state([sample(doc(hist_ts=range(198, 400)))], prev=s, now=2)
    ts = [t for t, _ in s.brokers[0].history]
    assert ts == list(range(100, 400))
    h1, h2 = LatencyHistogram(), LatencyHistogram()
    h2.record_many([0.001, 0.002])
    assert merge_history((), [(5, h1), (5, h2)]) == ((5, h2),)  # the newest answer wins
    assert merge_history(((4, h1), (5, h1)), [(5, h2), (6, h1)], keep_s=2) == ((5, h2), (6, h1))


def test_cluster_percentiles_merge_histograms_of_the_last_10_s():
    a, b = recorded("broker-1"), recorded("broker-3")
    s = build_state([sample(a, key="a"), sample(b, key="b", name="broker-3")], now=1)
    last = a["history"]["send"][-10:] + b["history"]["send"][-10:]
    merged = LatencyHistogram()
    for h in last:
        merged.merge(LatencyHistogram.from_dict(h))
    assert merged.count and s.summary.p99 == merged.quantile(0.99)
    assert s.summary.max == max(h["max"] for h in last if h["count"])
    assert s.summary.mean == merged.mean
    assert merge_histograms(LatencyHistogram.from_dict(h) for h in last) == merged
    assert merge_histograms([]) == LatencyHistogram()


def test_recorded_demo_replays_to_the_same_state():
    from console.config import ConsoleConfig
    from console.data.poller import Poller

    cfg = ConsoleConfig(replay=DATA).validate()
    states = [Poller.from_config(cfg).poll_once() for _ in range(2)]
    assert states[0].brokers == states[1].brokers
    excluded = json.loads((DATA / "producers" / "demo.json").read_text())["fuse"]["excluded"]
    isolated = [b.name for b in states[0].brokers if b.state == "ISOLATED"]
    assert isolated == excluded and excluded  # what the producer's fuse excludes
    stalled = states[0].broker("broker-2")  # 800 ms stalls every 3 s, then cleared
    assert len(stalled.history) > 100
    assert max(h.max for _, h in stalled.history if h.count) > 0.2


def test_state_is_not_mutated_by_the_next_build():
    s1 = build_state([sample(doc(hist_ts=range(5)))], now=1)
    frozen = copy.deepcopy(s1.brokers[0].history)
    s2 = build_state([sample(doc(hist_ts=range(3, 9)))], prev=s1, now=2)
    assert s1.brokers[0].history == frozen
    assert s2.summary.p99 is not None and s1.brokers[0].history == frozen  # merged copies


def test_alert_log_is_bounded_but_counts_every_edge():
    from console.data.alerts import MAX_ALERTS, Alert, AlertLog

    log = AlertLog()
    for i in range(MAX_ALERTS + 10):
        older = log
        log = log.update({f"k{i}": Alert(f"k{i}", "warning", "m")}, i)
        assert f"k{i}" in [a.key for a in log.since(older) if not a.cleared]
    assert len(log.entries) == MAX_ALERTS and log.total == 2 * (MAX_ALERTS + 10) - 1


def test_an_active_alert_shows_its_current_and_worst_value():
    """broker-2 "send max 29.8 ms" while it reached 841 ms: the text follows the figure."""
    s = build_state([sample(doc(mx=0.0298))], now=1)
    s = build_state([sample(doc(mx=0.841))], prev=s, now=2)
    [alert] = s.active_alerts
    assert alert.text == "broker-1 send max 841.0 ms > 20.0 ms (10 s)" and alert.time == 1
    s = build_state([sample(doc(mx=0.0312))], prev=s, now=3)
    [alert] = s.active_alerts
    assert alert.text == "broker-1 send max 31.2 ms > 20.0 ms (10 s); worst 841.0 ms"
    # the history keeps what was seen when it was raised: never rewritten by later figures
    assert [(a.time, a.text) for a in s.alerts.entries] == [
        (1, "broker-1 send max 29.8 ms > 20.0 ms (10 s)")]
    s = build_state([sample(doc())], prev=s, now=4)
    assert s.alerts.entries[-1].text == "cleared: broker-1 send max 31.2 ms > 20.0 ms (10 s); " \
                                        "worst 841.0 ms"
    s = build_state([sample(doc(mx=0.025))], prev=s, now=5)  # raised again: a fresh worst
    assert s.active_alerts[0].text == "broker-1 send max 25.0 ms > 20.0 ms (10 s)"


def test_the_alert_history_is_never_rewritten_and_a_new_severity_is_a_new_row():
    """A group shown `critical ... STALLED` at 09:28:35 had read `warning ... WARNING` then:
    the time it stalled was lost. Each severity is a row at the time it held."""
    from console.data.alerts import Alert, AlertLog

    log = AlertLog().update({"consumer:w": Alert("consumer:w", "warning", "w WARNING lag 10")},
                            100.0)
    log = log.update({"consumer:w": Alert("consumer:w", "warning", "w WARNING lag 900")}, 110.0)
    assert [(a.time, a.severity, a.text) for a in log.entries] == [
        (100.0, "warning", "w WARNING lag 10")]
    log = log.update({"consumer:w": Alert("consumer:w", "critical", "w STALLED lag 26512")},
                     120.0)
    assert [(a.time, a.severity, a.text) for a in log.entries] == [
        (100.0, "warning", "w WARNING lag 10"), (120.0, "critical", "w STALLED lag 26512")]
    assert [a.time for a in log.active] == [120.0]
    log = log.update({}, 130.0)
    assert [(a.time, a.cleared) for a in log.entries] == [
        (100.0, False), (120.0, False), (130.0, True)]


def failing(d: dict, errors: int, failures: int, codes: dict, last: dict | None = None,
            refused: dict | None = None):
    d["ops"]["send"]["10s"].update(errors=errors, failures=failures)
    d["send_error_codes"] = codes
    d["last_send_failure"] = last or {}
    d["last_send_refusal"] = refused or {}
    return d


def test_a_broker_failing_sends_itself_is_failing_and_unhealthy_with_the_latest_cause():
    """A broker answering SYSTEM_ERROR to every send answered /stats fast and was UP."""
    d = failing(doc(), 12, 12, {"SYSTEM_ERROR": 40},
                {"code": "SYSTEM_ERROR", "text": "injected error", "time": 999})
    s = build_state([sample(d), sample(doc("broker-2"), key="h2")], now=1)
    b = s.brokers[0]
    assert (b.state, b.reason) == ("FAILING", "failed 12 of 100 sends (10 s), latest "
                                              "SYSTEM_ERROR: injected error")
    assert s.summary.by_state["FAILING"] == 1 and not s.summary.healthy
    assert [(a.key, a.severity, a.text) for a in s.active_alerts] == [
        ("failing:broker-1", "critical",
         "broker-1 failed 12 sends itself (10 s), latest SYSTEM_ERROR: injected error")]
    d = failing(doc(), 3, 3, {"SYSTEM_ERROR": 43},
                {"code": "SYSTEM_ERROR", "text": "injected error", "time": 1000})
    s = build_state([sample(d), sample(doc("broker-2"), key="h2")], prev=s, now=2)
    assert s.active_alerts[0].text.endswith("injected error; worst 12 sends")
    assert [e.text for e in s.events if e.broker == "broker-1"] == [
        "start → FAILING: failed 12 of 100 sends (10 s), latest SYSTEM_ERROR: injected error"]
    s = build_state([sample(doc()), sample(doc("broker-2"), key="h2")], prev=s, now=3)
    assert s.brokers[0].state == "UP" and not s.active_alerts and s.summary.healthy


def test_refused_input_is_a_warning_and_leaves_the_broker_up():
    """An oversize message or a read-only topic is the caller's or the operator's doing: the
    broker serving it is not failing. The alert quotes the latest refusal."""
    d = failing(doc(), 7, 0, {"MESSAGE_TOO_LARGE": 5, "NO_PERMISSION": 9, "SYSTEM_BUSY": 1},
                refused={"code": "NO_PERMISSION", "text": "orders is read-only", "time": 999})
    s = build_state([sample(d)], now=1)
    assert s.brokers[0].state == "UP" and s.summary.healthy
    assert s.brokers[0].last_refusal == "NO_PERMISSION: orders is read-only"
    assert [(a.key, a.severity, a.text) for a in s.active_alerts] == [
        ("refused:broker-1", "warning", "broker-1 refused 7 sends (10 s), latest "
         "NO_PERMISSION: orders is read-only (since start: NO_PERMISSION 9, "
         "MESSAGE_TOO_LARGE 5)")]
    one = failing(doc(), 2, 1, {"SYSTEM_BUSY": 1}, {"code": "SYSTEM_BUSY", "text": "busy"})
    one["ops"]["send"]["10s"]["count"] = 1
    s = build_state([sample(one)], now=2)
    assert s.brokers[0].reason == "failed 1 of 1 send (10 s), latest SYSTEM_BUSY: busy"
    assert {a.text for a in s.active_alerts} >= {
        "broker-1 failed 1 send itself (10 s), latest SYSTEM_BUSY: busy"}
    assert any(a.text.startswith("broker-1 refused 1 send (10 s)") for a in s.active_alerts)


def test_sends_to_a_deposed_master_are_info_not_a_warning_about_the_callers():
    """After a failover the clients' routes still name the old master for a moment; it
    answers NOT_MASTER as a slave should. The alert used to blame the callers' input or the
    topics' settings. A master refusing NOT_MASTER (fenced, it hears neither ZooKeeper nor
    its slaves) stays a warning."""
    said = {"code": "NOT_MASTER", "text": "group-1-a is slave of group g1", "time": 999}
    d = failing({**doc("group-1-a"), "ha": {"group": "g1", "role": "SLAVE", "epoch": 2}},
                8, 0, {"NOT_MASTER": 8}, refused=said)
    s = build_state([sample(d, name="group-1-a")], now=1)
    assert s.brokers[0].state == "UP"
    assert [(a.severity, a.text) for a in s.active_alerts if a.key == "refused:group-1-a"] == [
        ("info", "group-1-a refused 8 sends (10 s) as a slave, latest NOT_MASTER: group-1-a "
                 "is slave of group g1 (since start: NOT_MASTER 8)")]
    d["ha"]["role"] = "MASTER"
    s = build_state([sample(d, name="group-1-a")], now=2)
    assert [a.severity for a in s.active_alerts if a.key == "refused:group-1-a"] == [
        "warning"]


def test_failing_and_slow_says_both_and_isolated_outranks_failing():
    d = failing(doc(mx=0.05), 4, 2, {"FLUSH_SLAVE_TIMEOUT": 2, "MESSAGE_ILLEGAL": 2},
                {"code": "FLUSH_SLAVE_TIMEOUT", "text": "", "time": 999})
    s = build_state([sample(d)], now=1)
    assert (s.brokers[0].state, s.brokers[0].reason) == (
        "FAILING", "failed 2 of 100 sends (10 s), latest FLUSH_SLAVE_TIMEOUT; "
                   "send max 50.0 ms > 20 ms (10 s)")
    assert {a.key for a in s.active_alerts} == {"failing:broker-1", "refused:broker-1",
                                                "max:broker-1"}
    fuse = {"cap": 1, "excluded": ["broker-1"], "overflow": [],
            "isolated": [{"broker": "broker-1", "reason": "error FLUSH_SLAVE_TIMEOUT"}]}
    s = build_state([sample(d)], [producer({"producer": "bench", "fuse": fuse})], prev=s,
                    now=2)
    assert s.brokers[0].state == "ISOLATED" and "failing:broker-1" in {
        a.key for a in s.active_alerts}


def test_a_hot_queue_is_named_with_its_rate_and_what_to_do():
    d = doc()
    d["topics"] = {"orders": 8}
    d["hottest_queues"] = [
        {"topic": "orders", "queue": 3, "rate": 1500.0, "times_median": 40.0, "depth": 9,
         "hot": True},
        {"topic": "orders", "queue": 1, "rate": 40.0, "times_median": 1.1, "depth": 2,
         "hot": False}]
    s = build_state([sample(d)], now=1)
    assert [(a.key, a.severity, a.text) for a in s.active_alerts] == [
        ("hot:broker-1:orders/3", "warning",
         "hot queue orders/3 on broker-1: 1,500 msgs/s, 40x its topic's median queue "
         "(spread its keys or give orders more queues)")]
    from console.tui.panels import queues

    text = queues.render(s, s.brokers[0].key).plain
    assert text.splitlines()[0] == "1 topics, 8 queues"
    assert "orders/3" in text.splitlines()[1] and text.splitlines()[1].endswith("HOT")
    assert "HOT" not in text.splitlines()[2]


def test_growing_dead_letters_are_an_alert_and_counted_on_the_group():
    d = doc()
    d["consumers"] = {"warehouse": {"status": "OK", "lag": 0, "topics": ["demo"], "queues": []}}
    d["dead_letters"] = {"warehouse": {"count": 12, "per_s": 0.5}}
    s = build_state([sample(d)], now=1)
    assert [(a.key, a.severity, a.text) for a in s.active_alerts] == [
        ("dlq:warehouse", "warning", "dead letters of group warehouse growing: 0.5/s, 12 in "
                                     "all (`floodgate dlq show --group warehouse`)")]
    (g,) = s.consumers
    assert (g.dead_letters, g.dead_per_s) == (12, 0.5)
    d["dead_letters"] = {"warehouse": {"count": 12, "per_s": 0.0}}
    assert not build_state([sample(d)], prev=s, now=2).active_alerts  # no longer growing


def test_a_disk_past_the_stores_lines_is_an_alert_with_what_it_means():
    """A disk at 92 % refused every send DISK_FULL, and no alert said the disk was why."""
    d = doc()
    d["disk"] = {"used_ratio": 0.80}
    s = build_state([sample(d)], now=1)
    assert [(a.key, a.severity, a.text) for a in s.active_alerts] == [
        ("disk:broker-1", "warning", "broker-1 disk 80% used, over 75%: the oldest segments "
         "go early, however young")]
    d["disk"] = {"used_ratio": 0.92, "max_used_ratio": 0.6, "full_ratio": 0.85}  # its own
    s = build_state([sample(d)], prev=s, now=2)
    assert [(a.severity, a.text) for a in s.active_alerts] == [
        ("critical", "broker-1 disk 92% used, over 85%: sends are refused DISK_FULL")]
    d["disk"] = {"used_ratio": 0.5}
    assert not build_state([sample(d)], prev=s, now=3).active_alerts
