"""Behaviour of `Fuse` on a virtual clock."""

from __future__ import annotations

import pytest

from fuse import Fuse, FuseError
from tests.fuse.fuse_kit import make, names, slow


def test_round_robin_over_all_brokers_when_healthy():
    fuse, _ = make(4)
    picks = [fuse.choose() for _ in range(8)]
    assert sorted(picks[:4]) == names(4) and picks[:4] == picks[4:]


def test_error_isolates_and_choose_skips_it():
    fuse, _ = make(10)
    fuse.report("b3", 0.001, ok=False)
    assert fuse.snapshot().excluded == {"b3"}
    assert "b3" not in {fuse.choose() for _ in range(50)}
    entry = fuse.snapshot().isolated[0]
    assert (entry.broker, entry.reason, entry.overflow) == ("b3", "error", False)


def test_the_cause_of_an_isolation_stays_while_its_latest_offence_changes():
    fuse, clock = make(10)
    fuse.report("b3", 0.001, ok=False)  # isolated for an error ...
    clock.advance(0.5)
    slow(fuse, "b3", 0.200)  # ... then its calls in flight come back slow
    snap = fuse.snapshot()
    entry = snap.isolated[0]
    assert (entry.cause, entry.reason, entry.offences) == ("error", "slow", 3)
    assert [(t.event, t.reason) for t in snap.transitions] == [("isolate", "error")]
    assert snap.to_dict()["isolated"][0]["cause"] == "error"


def test_slow_calls_isolate_fast_calls_do_not():
    fuse, _ = make(10)
    slow(fuse, "b1", 0.009)
    slow(fuse, "b2", 0.050)
    snap = fuse.snapshot()
    assert snap.excluded == {"b2"} and snap.isolated[0].reason == "slow"


def test_a_slow_isolation_says_how_slow_against_what_line():
    """'isolated for slowness' sent the operator to the broker's graphs for the number."""
    fuse, _ = make(10)
    for b in names(10):
        fuse.report(b, 0.001, ok=True)
    slow(fuse, "b4", 0.0432)
    isolate = [t for t in fuse.snapshot().transitions if t.event == "isolate"]
    assert [t.to_dict()["detail"] for t in isolate] == ["a call of 43.2 ms, the line 10.0 ms"]
    fuse.report("b5", 0.001, ok=False)  # an error with nothing to say adds nothing
    assert "detail" not in fuse.snapshot().transitions[-1].to_dict()


def test_an_error_isolation_says_what_the_call_got():
    """'isolated: error' left the operator to guess between a dead process, a full disk
    and a master whose slave had not rejoined yet."""
    fuse, _ = make(10)
    fuse.end(fuse.begin("b3"), ok=False, why="SYSTEM_ERROR: injected error")
    with pytest.raises(ConnectionResetError), fuse.calling("b6"):
        raise ConnectionResetError("connection reset by peer")
    details = [t.detail for t in fuse.snapshot().transitions if t.event == "isolate"]
    assert details == ["SYSTEM_ERROR: injected error",
                       "ConnectionResetError: connection reset by peer"]


def test_an_isolation_whose_one_cause_is_known_to_be_gone_ends_before_its_minute():
    """A failed-over group's new master answers "one copy only" until its slave is back;
    the producer, told so by the routes, ends that isolation then. Any other offence in
    the same isolation (another error, a slow call) keeps it for its minute."""
    one_copy = "SLAVE_NOT_AVAILABLE: stored short of its promise"
    fuse, clock = make(10)
    for _ in range(3):
        fuse.end(fuse.begin("b1"), ok=False, why=one_copy)
    fuse.end(fuse.begin("b2"), ok=False, why=one_copy)
    fuse.end(fuse.begin("b2"), ok=False, why="SYSTEM_ERROR: injected error")
    fuse.end(fuse.begin("b3"), ok=False, why=one_copy)
    slow(fuse, "b3", 0.05)
    fuse.end(fuse.begin("b4"), ok=False, why="SYSTEM_ERROR: injected error")
    clock.advance(1.0)
    assert not fuse.release_if("b4", one_copy, "in-sync")  # isolated for something else
    assert not fuse.release_if("b5", one_copy, "in-sync")  # not isolated at all
    assert [b for b in ("b1", "b2", "b3") if fuse.release_if(b, one_copy, "in-sync")] == ["b1"]
    snap = fuse.snapshot()
    assert snap.excluded == {"b2", "b3", "b4"}  # the cap of 3 of 10 holds all three
    assert [(t.broker, t.event, t.reason) for t in snap.transitions][-1] == (
        "b1", "release", "in-sync")
    assert "b1" in [fuse.choose() for _ in range(10)]
    # a call begun before the release, answered after it, is the old cause, not news ...
    fuse2, clock2 = make(10)
    early = fuse2.begin("b1")
    fuse2.end(fuse2.begin("b1"), ok=False, why=one_copy)
    clock2.advance(0.5)
    assert fuse2.release_if("b1", one_copy, "in-sync")
    clock2.advance(0.01)
    fuse2.end(early, ok=False, why=one_copy)
    assert fuse2.snapshot().excluded == frozenset()
    # ... and one begun after it is
    fuse2.end(fuse2.begin("b1"), ok=False, why=one_copy)
    assert fuse2.snapshot().excluded == {"b1"}


def test_a_cause_known_gone_before_its_answer_arrives_isolates_nobody():
    """The producer may learn that the group's slave is in sync before the answer of a
    call sent while it was not: that late one-copy answer is old news, not a minute out.
    One from a call begun after is news."""
    one_copy = "SLAVE_NOT_AVAILABLE: stored short of its promise"
    fuse, clock = make(10)
    early = fuse.begin("b1")
    clock.advance(0.2)
    assert not fuse.release_if("b1", one_copy, "in-sync")  # nothing to release yet
    clock.advance(0.01)
    fuse.end(early, ok=False, why=one_copy)
    assert fuse.snapshot().excluded == frozenset()
    fuse.end(fuse.begin("b1"), ok=False, why="SYSTEM_ERROR: injected error")  # another cause
    assert fuse.snapshot().excluded == {"b1"}
    fuse2, clock2 = make(10)
    fuse2.release_if("b1", one_copy, "in-sync")
    clock2.advance(0.01)
    fuse2.end(fuse2.begin("b1"), ok=False, why=one_copy)
    assert fuse2.snapshot().excluded == {"b1"}


def test_one_slow_call_is_a_suspect_two_within_a_second_isolate():
    fuse, clock = make(10)  # line 10 ms (no baseline yet)
    fuse.report("b1", 0.015, ok=True)
    clock.advance(1.5)
    fuse.report("b1", 0.015, ok=True)  # the first is too old to count
    assert fuse.snapshot().isolated == ()
    clock.advance(0.5)
    fuse.report("b1", 0.015, ok=True)
    assert fuse.snapshot().excluded == {"b1"}
    fuse2, _ = make(10, slow_calls=1)
    fuse2.report("b1", 0.015, ok=True)
    assert fuse2.snapshot().excluded == {"b1"}


def test_one_call_past_twice_the_line_isolates_alone():
    fuse, _ = make(10)
    fuse.report("b1", 0.021, ok=True)
    assert fuse.snapshot().excluded == {"b1"}


def test_a_single_stuck_call_isolates_at_twice_the_line_while_in_flight():
    fuse, clock = make(10)  # a one-thread producer: one call at a time
    token = fuse.begin("b2")
    clock.advance(0.011)
    fuse.tick()
    assert fuse.snapshot().isolated == ()  # past the line once: a suspect
    clock.advance(0.010)
    fuse.tick()
    assert fuse.snapshot().excluded == {"b2"}
    clock.advance(2.0)
    fuse.tick()  # past 4x the line: stuck, one more offence
    assert fuse.snapshot().isolated[0].offences == 2
    fuse.end(token, ok=True)  # the stall ends: same call, no new offence or isolation
    snap = fuse.snapshot()
    assert snap.isolations_total["slow"] == 1 and snap.inflight == 0
    assert snap.isolated[0].offences == 2


def test_isolation_lasts_a_minute_with_at_most_ten_percent_jitter():
    fuse, clock = make(10)
    fuse.report("b0", 0.001, ok=False)
    entry = fuse.snapshot().isolated[0]
    assert 60.0 <= entry.until - entry.since <= 66.0
    clock.advance(59.99)
    assert fuse.snapshot().excluded == {"b0"}
    clock.t = entry.until
    snap = fuse.snapshot()
    assert snap.excluded == frozenset() and snap.isolated == ()
    assert snap.transitions[-1].event == "release" and snap.transitions[-1].reason == "expired"


def test_offence_while_isolated_restarts_the_minute_and_after_return_isolates_again():
    fuse, clock = make(10, jitter_ratio=0.0)
    fuse.report("b0", 0.001, ok=False)
    clock.advance(30)
    fuse.report("b0", 0.001, ok=False)  # e.g. an overflow call or a late answer
    assert fuse.snapshot().isolated[0].until == pytest.approx(clock.t + 60)
    clock.advance(60)
    assert fuse.snapshot().isolated == ()
    fuse.report("b0", 0.001, ok=False)  # offends right after return
    assert fuse.snapshot().excluded == {"b0"}


def test_cap_keeps_excluded_at_thirty_percent_and_overflows_the_earliest():
    fuse, clock = make(10)
    for i in range(5):
        fuse.report(f"b{i}", 0.001, ok=False)
        clock.advance(1)
    snap = fuse.snapshot()
    assert snap.cap == 3
    assert [e.broker for e in snap.isolated] == ["b0", "b1", "b2", "b3", "b4"]
    assert snap.overflow == {"b0", "b1"} and snap.excluded == {"b2", "b3", "b4"}
    assert {fuse.choose() for _ in range(100)} == {"b0", "b1", "b5", "b6", "b7", "b8", "b9"}
    assert snap.overflow_total == 2
    events = [(t.broker, t.event) for t in snap.transitions if t.event == "overflow"]
    assert events == [("b0", "overflow"), ("b1", "overflow")]


def test_overflow_broker_is_excluded_again_when_the_list_shrinks():
    fuse, clock = make(10, jitter_ratio=0.0)
    fuse.report("b0", 0.001, ok=False)
    for i in range(1, 4):
        clock.advance(1)
        fuse.report(f"b{i}", 0.001, ok=False)
    assert fuse.snapshot().overflow == {"b0"}
    fuse.remove_broker("b3")  # 9 brokers: cap 2, list of 3 -> still one overflow
    assert fuse.snapshot().overflow == {"b0"}
    fuse.remove_broker("b2")  # 8 brokers: cap 2, list of 2 -> nothing overflows
    snap = fuse.snapshot()
    assert snap.overflow == frozenset() and snap.excluded == {"b0", "b1"}
    assert snap.transitions_total["reexclude"] == 1


def test_small_cluster_records_but_excludes_nothing():
    fuse, _ = make(3)
    fuse.report("b0", 0.001, ok=False)
    snap = fuse.snapshot()
    assert snap.cap == 0 and snap.excluded == frozenset()
    assert snap.overflow == {"b0"} and snap.isolated_count == 1
    assert {fuse.choose() for _ in range(9)} == {"b0", "b1", "b2"}


def test_add_broker_raises_the_cap_and_remove_drops_state():
    fuse, _ = make(3)
    fuse.report("b0", 0.001, ok=False)
    fuse.add_broker("b3")
    snap = fuse.snapshot()
    assert snap.cap == 1 and snap.excluded == {"b0"}
    fuse.remove_broker("b0")
    snap = fuse.snapshot()
    assert snap.isolated == () and "b0" not in snap.brokers
    fuse.report("b0", 0.001, ok=False)  # a late answer from a removed broker is ignored
    assert fuse.snapshot().isolated == ()
    fuse.remove_broker("nope")  # no-op



def test_calls_to_a_replaced_broker_are_not_held_against_its_successor():
    """A failover: the producer drops the dead master's name and adds it back for the
    promoted slave (remove, add). Calls sent to the dead one that fail or hang after
    that belong to it, not to the new master (the demo's kill act re-isolated the
    healthy group 26 ms after 'removed' and kept it out for the minute)."""
    fuse, clock = make(10)
    failed = fuse.begin("b1")
    hanging = fuse.begin("b1")
    clock.advance(0.5)
    fuse.remove_broker("b1")
    fuse.add_broker("b1")
    clock.advance(0.01)
    fuse.end(failed, ok=False)  # its connection to the dead process broke just now
    fuse.report("b1", 0.6, ok=False)  # the same, reported with its RT
    clock.advance(5.0)
    fuse.tick()  # `hanging` is 500 lines old by now
    assert fuse.snapshot().isolated == ()
    fuse.end(hanging, ok=True)
    assert fuse.snapshot().isolated == ()
    fuse.report("b1", 0.001, ok=False)  # a call to the new master does count
    assert fuse.snapshot().excluded == {"b1"}
def test_in_flight_call_counts_as_slow_once_it_passes_the_line():
    fuse, clock = make(10)
    token = fuse.begin("b4")
    other = fuse.begin("b4")  # a stuck broker holds every call sent to it
    clock.advance(0.009)
    fuse.tick()
    assert fuse.snapshot().excluded == frozenset()
    clock.advance(0.002)
    fuse.choose()  # the hot path does the housekeeping by itself
    snap = fuse.snapshot()
    assert snap.excluded == {"b4"} and snap.isolated[0].since == pytest.approx(clock.t)
    clock.advance(1.0)
    rt = fuse.end(token, ok=True)  # the late answer is the same offence, not a new isolation
    assert rt == pytest.approx(1.011)
    assert fuse.snapshot().isolations_total["slow"] == 1
    fuse.end(other, ok=True)
    assert fuse.snapshot().inflight == 0


def test_calling_context_manager_reports_exceptions_as_errors():
    fuse, _ = make(10)
    with pytest.raises(RuntimeError), fuse.calling("b5"):
        raise RuntimeError("connection reset")
    with fuse.calling("b6"):
        pass
    snap = fuse.snapshot()
    assert snap.excluded == {"b5"} and snap.inflight == 0


def test_candidates_skip_excluded_and_fall_back_to_earliest_isolated():
    fuse, clock = make(10)
    fuse.report("b1", 0.001, ok=False)
    clock.advance(1)
    fuse.report("b2", 0.001, ok=False)
    assert {fuse.choose(["b1", "b2", "b3"]) for _ in range(10)} == {"b3"}
    assert fuse.choose(["b2", "b1"]) == "b1"
    with pytest.raises(FuseError):
        fuse.choose([])


def test_dry_run_records_but_excludes_nothing():
    fuse, _ = make(10, dry_run=True)
    fuse.report("b0", 0.001, ok=False)
    snap = fuse.snapshot()
    assert snap.dry_run and snap.excluded == frozenset() and snap.would_exclude == {"b0"}
    assert snap.transitions_total["isolate"] == 1
    assert "b0" in {fuse.choose() for _ in range(10)}


def test_backoff_lengthens_repeat_isolations_within_bound():
    fuse, clock = make(10, jitter_ratio=0.0, backoff=2.0, max_isolation_s=150.0)
    durations = []
    for _ in range(4):
        fuse.report("b0", 0.001, ok=False)
        entry = fuse.snapshot().isolated[0]
        durations.append(entry.until - entry.since)
        clock.t = entry.until + 1.0  # returns, offends again a second later
        fuse.snapshot()
    assert durations == [60.0, 120.0, 150.0, 150.0]
    clock.advance(3600)
    fuse.report("b0", 0.001, ok=False)  # long healthy: back to one minute
    entry = fuse.snapshot().isolated[0]
    assert entry.until - entry.since == 60.0 and entry.repeats == 0


def test_same_seed_same_jitter():
    def untils(seed):
        fuse, _ = make(10, seed=seed)
        fuse.report("b0", 0.001, ok=False)
        return fuse.snapshot().isolated[0].until

    assert untils(1) == untils(1) != untils(2)


def test_transitions_keep_the_last_hundred():
    fuse, clock = make(10, jitter_ratio=0.0)
    for _ in range(60):
        fuse.report("b0", 0.001, ok=False)
        clock.advance(61)
        fuse.snapshot()
    snap = fuse.snapshot()
    assert len(snap.transitions) == 100 and snap.transitions_total["isolate"] == 60
    times = [t.time for t in snap.transitions]
    assert times == sorted(times)


def test_snapshot_to_dict_is_json_ready():
    import json

    fuse, _ = make(10)
    fuse.report("b0", 0.001, ok=False)
    data = json.loads(json.dumps(fuse.snapshot().to_dict()))
    assert data["excluded"] == ["b0"] and data["isolated"][0]["reason"] == "error"
    assert data["cap"] == 3 and data["transitions"][0]["event"] == "isolate"


@pytest.mark.parametrize("kwargs", [
    {"isolation_s": 0}, {"max_isolated_ratio": 1.0}, {"slow_s": -1}, {"jitter_ratio": 0.2},
    {"backoff": 0.5}, {"max_isolation_s": 10}, {"no_such_setting": 1},
])
def test_bad_settings_are_fuse_errors(kwargs):
    with pytest.raises(FuseError):
        Fuse(names(3), **kwargs)


def test_bad_input_is_a_fuse_error():
    fuse, _ = make(3)
    with pytest.raises(FuseError):
        fuse.report("b0", -1.0)
    with pytest.raises(FuseError):
        fuse.report("b0", float("nan"))
    with pytest.raises(FuseError):
        fuse.add_broker("")
    with pytest.raises(FuseError):
        Fuse([]).choose()
    with pytest.raises(FuseError):
        Fuse("b0,b1")


def test_whoever_listens_hears_each_isolation_and_its_cause_but_not_in_a_dry_run():
    heard = []
    fuse, _clock = make(10)
    fuse.on_isolate(lambda broker, reason, detail: heard.append((broker, reason, detail)))
    slow(fuse, "b2", 0.050)
    slow(fuse, "b2", 0.050)  # again: the same isolation, no news
    fuse.end(fuse.begin("b3"), ok=False, why="SYSTEM_BUSY: write path busy")
    assert [h[:2] for h in heard] == [("b2", "slow"), ("b3", "error")]
    assert heard[0][2].startswith("a call of 50.0 ms") and heard[1][2] == "SYSTEM_BUSY: write path busy"
    dry, _clock = make(10, dry_run=True)
    dry.on_isolate(lambda broker, reason, detail: heard.append((broker, reason)))
    slow(dry, "b2", 0.050)
    assert "b2" in dry.snapshot().would_exclude and len(heard) == 2
