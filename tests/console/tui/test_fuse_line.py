"""The fuse in one line and one count: FuseCounts over producers' /stats
`fuse` dicts, the sentence on the cluster screen, and the same count in the
header, the fuse screen and the cap alert."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from broker_core.observe.stats_doc import BrokerStats, ProducerStats
from console.data.fuse_counts import fuse_counts
from console.data.state import BrokerSample, ProducerSample, build_state, producer_view
from console.tui.panels import render_panel
from console.tui.panels.fuse_line import fuse_sentence

DATA = Path(__file__).parents[1] / "recorded" / "demo"
BROKERS = [f"broker-{i}" for i in range(1, 7)]
T0 = datetime(2025, 11, 11, tzinfo=UTC).timestamp()  # the console's clock shows UTC


def entry(broker, reason="slow", since=2467, left=42.4, overflow=False):
    return {"broker": broker, "reason": reason, "since": 100.0, "since_wall": T0 + since,
            "until": 160.0, "left_s": left, "overflow": overflow, "offences": 3, "repeats": 0}


def fuse(*entries, cap=1, dry_run=False, **extra):
    excluded = [e["broker"] for e in entries if not e["overflow"]]
    return {"time": 130.0, "brokers": BROKERS, "cap": cap, "dry_run": dry_run,
            "isolated_count": len(entries), "isolated": list(entries),
            "excluded": [] if dry_run else sorted(excluded),
            "would_exclude": sorted(excluded) if dry_run else [],
            "overflow": sorted(e["broker"] for e in entries if e["overflow"]),
            "transitions": [], **extra}


def producer(doc_fuse, name="demo", key=None):
    return ProducerSample(key or f"http/{name}",
                          ProducerStats.from_dict({"producer": name, "fuse": doc_fuse}))


def sentence(*producers):
    return fuse_sentence([producer_view(p) for p in producers])


def test_nothing_isolated():
    assert sentence(producer(fuse())) == "fuse: nothing isolated; cap 1 of 6 brokers free"


def test_one_isolated_for_slowness():
    assert sentence(producer(fuse(entry("broker-2")))) == \
        "fuse: broker-2 isolated 00:41:07 for slowness, 42 s left; cap 1 of 6 brokers full"


def test_the_cause_is_said_and_a_different_latest_offence_beside_it():
    e = {**entry("broker-2", "slow"), "cause": "error"}
    assert sentence(producer(fuse(e))) == ("fuse: broker-2 isolated 00:41:07 for errors (now "
                                           "slow), 42 s left; cap 1 of 6 brokers full")
    console = Console(width=200)
    with console.capture() as out:
        console.print(render_panel("fuse_status", build_state([], [producer(fuse(e))], None, T0)))
    assert "broker-2  error, now slow" in out.get()


def test_isolated_and_overflow_by_rule_4_earliest_first():
    f = fuse(entry("broker-4", "error", since=2400, overflow=True),
             entry("broker-1", since=2410, overflow=True), entry("broker-2", left=5))
    assert sentence(producer(f)) == (
        "fuse: broker-2 isolated 00:41:07 for slowness, 5 s left; cap 1 of 6 brokers full; "
        "broker-4 erroring, broker-1 slow, serving as overflow")


def test_cap_partly_used_and_dry_run():
    assert sentence(producer(fuse(entry("broker-2"), cap=2))).endswith(
        "; cap 2 of 6 brokers, 1 in use")
    assert sentence(producer(fuse(entry("broker-2"), dry_run=True))) == (
        "fuse: dry run, excludes nobody; would exclude broker-2 isolated 00:41:07 for "
        "slowness, 42 s left")


def test_several_producers_agree_or_are_named():
    f = fuse(entry("broker-2"))
    assert sentence(producer(f, "a"), producer(f, "b")).startswith(
        "fuse (2 producers agree): broker-2 isolated")
    two = sentence(producer(f, "a"), producer(fuse(), "b"))
    assert two == ("fuse of a: broker-2 isolated 00:41:07 for slowness, 42 s left; cap 1 of 6 "
                   "brokers full │ fuse of b: nothing isolated; cap 1 of 6 brokers free")


def test_no_producer_or_one_not_answering_or_without_fuse():
    assert sentence() == "fuse: no producer to ask (--producers HTTP_ADDR)"
    assert sentence(ProducerSample("127.0.0.1:9", None, "connection refused")) == \
        "fuse of 127.0.0.1:9: producer not answering (connection refused)"
    assert sentence(ProducerSample("p", ProducerStats("bench"))) == \
        "fuse of bench: off"


@pytest.mark.parametrize("doc", [
    {}, {"isolated": "x", "cap": "1", "excluded": None, "brokers": 6},
    {"isolated": [5, None, {"reason": "slow"}, {"broker": "b1"}]},
    {"isolated": [{"broker": "b1", "overflow": True, "left_s": "soon", "since_wall": None}],
     "cap": 1},
])
def test_missing_or_malformed_keys_never_crash(doc):
    c = fuse_counts(doc)
    assert all(isinstance(b, str) for b in c.excluded + c.overflow)
    assert sentence(producer(doc)).startswith("fuse: ")


def test_unknown_keys_are_ignored_and_lists_derived_from_entries():
    f = {"cap": 1, "brokers": BROKERS, "client_lateness": {"lag_p99_s": 0.04},
         "isolated": [entry("broker-2", overflow=True), {**entry("broker-3"), "new": 1}]}
    c = fuse_counts(f)
    assert (c.excluded, c.overflow, c.at_cap) == (("broker-3",), ("broker-2",), True)


def test_one_count_in_header_fuse_screen_and_cap_alert():
    """The recording: 4 isolated, cap 1: 1 excluded and 3 serving as overflow."""
    from console.config import ConsoleConfig
    from console.data.poller import Poller

    state = Poller.from_config(ConsoleConfig(replay=DATA).validate()).poll_once()
    s = state.summary
    assert (s.isolated, s.overflow, s.cap) == (1, 3, 1)
    assert s.by_state["ISOLATED"] == s.isolated

    def text(panel):
        console = Console(width=200)
        with console.capture() as out:
            console.print(render_panel(panel, state))
        return out.get()

    assert "excluded 1/1 +3 overflow" in text("summary")
    assert "fuse: broker-3 isolated" in text("summary")
    assert "demo  excluded 1/1  overflow 3" in text("fuse_status")
    [cap] = [a for a in state.active_alerts if a.key == "cap:demo"]
    assert cap.text.startswith("fuse of demo: 1 excluded, at its cap of 1; 3 more isolated")


def test_union_of_producers_in_the_header():
    f1 = fuse(entry("broker-1", overflow=True), entry("broker-2"))
    f2 = fuse(entry("broker-3"))
    docs = [BrokerSample(f"h{b}", b, BrokerStats(broker=b)) for b in BROKERS]
    s = build_state(docs, [producer(f1, "a"), producer(f2, "b")], now=1).summary
    assert (s.isolated, s.overflow) == (2, 1)  # broker-2 and broker-3 excluded; broker-1 serves
    s = build_state(docs, [producer(f1, "a"), producer(fuse(entry("broker-1")), "b")],
                    now=1).summary
    assert (s.isolated, s.overflow) == (2, 0)  # excluded by b: not overflow in the header


def test_a_cap_of_none_is_said_in_words():
    three = {**fuse(cap=0), "brokers": ["group-1", "group-2", "group-3"]}
    assert sentence(producer(three)) == (
        "fuse: nothing isolated; 3 brokers: the 30 % cap allows none out (overflow only; "
        "4 or more let the fuse isolate one)")


def test_a_producer_short_of_its_target_rate_is_said_on_the_cluster_header():
    def with_load(rate, target=1000.0):
        doc = {"producer": "demo", "fuse": fuse(),
               "load": {"rate": rate, "target_rate": target, "window_s": 10.0}}
        return ProducerSample("http/demo", ProducerStats.from_dict(doc))

    def header(sample) -> str:
        state = build_state([], [sample], None, T0)
        return render_panel("summary", state).plain

    assert producer_view(with_load(950.0)).behind is None  # within 10 %
    assert "behind" not in header(with_load(950.0))
    assert producer_view(with_load(800.0)).behind == (800.0, 1000.0)
    # rates written as every other rate of the console (console.tui.format.rate)
    assert "producer demo behind: 800/s of 1.0k/s (80%)" in header(with_load(800.0))
    assert producer_view(with_load(800.0, None)).behind is None  # flat out: no target


def test_the_transitions_table_says_how_slow():
    t = {"time": 100.0, "wall_time": T0 + 2467, "broker": "broker-2", "event": "isolate",
         "reason": "slow", "detail": "a call of 43.2 ms, the line 10.0 ms"}
    state = build_state([], [producer(fuse(entry("broker-2"), transitions=[t]))], None, T0)
    console = Console(width=200)
    with console.capture() as out:
        console.print(render_panel("fuse_timeline", state))
    assert "isolate  slow: a call of 43.2 ms, the line 10.0 ms" in out.get()
