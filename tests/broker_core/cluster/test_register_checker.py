"""The register's linearizability check (cluster.register_checker) on histories built by
hand: orders that can be explained pass; a stale read, an append below an end already
seen, a lost or doubled write, one stored though refused, each fails and is named."""

from __future__ import annotations

from broker_core.cluster.register_checker import check_register


def op(name, start, end, expect, outcome, at=None, value=None):
    evs = [{"type": "reg", "t": start, "op": name, "expect": expect,
            "value": value or f"v{name}"}]
    if outcome == "ok":
        evs.append({"type": "reg-ok", "t": end, "op": name, "offset": at})
    elif outcome == "conflict":
        evs.append({"type": "reg-conflict", "t": end, "op": name, "end": at})
    elif outcome == "unknown":
        evs.append({"type": "reg-unknown", "t": end, "op": name, "why": "deadline"})
    return evs


def reads(*values):
    return [{"type": "reg-read", "t": 99.0, "offset": i, "value": v} for i, v in
            enumerate(values)]


def test_concurrent_compare_and_sets_with_an_unknown_one_are_linearizable():
    h = (op("a", 0.0, 1.0, 0, "ok", at=0) + op("b", 0.5, 1.5, 0, "conflict", at=1)
         + op("c", 1.6, 2.0, 1, "unknown") + op("d", 2.1, 3.0, 1, "conflict", at=2)
         + op("e", 3.1, 4.0, 2, "ok", at=2) + reads("va", "vc", "ve"))
    got = check_register(sorted(h, key=lambda e: e["t"]))
    assert got["linearizable"] and (got["ok"], got["conflicts"], got["unknown"]) == (2, 2, 1)
    assert got["lost"] == got["duplicated"] == got["cas_violations"] == 0


def test_a_stale_read_after_an_append_finished_is_not_linearizable():
    h = op("a", 0.0, 1.0, 0, "ok", at=0) + op("b", 2.0, 3.0, 0, "conflict", at=0) + reads("va")
    got = check_register(sorted(h, key=lambda e: e["t"]))
    assert not got["linearizable"]
    assert "a (appended at 0) finished before b (saw the end at 0) began" in got["violations"][0]


def test_an_end_seen_then_an_append_below_it_is_not_linearizable():
    # a deposed leader's uncommitted tail, seen by b, then cut: c appends below it
    h = (op("a", 0.0, 1.0, 0, "ok", at=0) + op("b", 1.1, 1.5, 1, "conflict", at=3)
         + op("c", 2.0, 2.5, 1, "ok", at=1) + reads("va", "vc"))
    assert not check_register(sorted(h, key=lambda e: e["t"]))["linearizable"]


def test_an_unknown_append_seen_before_it_began_is_not_linearizable():
    h = (op("a", 0.0, 1.0, 0, "conflict", at=1) + op("b", 2.0, 3.0, 0, "unknown")
         + reads("vb"))
    assert not check_register(sorted(h, key=lambda e: e["t"]))["linearizable"]


def test_lost_doubled_and_refused_yet_stored_writes_are_counted():
    h = (op("a", 0.0, 1.0, 0, "ok", at=0) + op("b", 1.0, 2.0, 1, "ok", at=1)
         + op("c", 2.0, 3.0, 2, "conflict", at=5) + reads("va", "vc", "va"))
    got = check_register(sorted(h, key=lambda e: e["t"]))
    assert (got["lost"], got["duplicated"], got["conflict_stored"]) == (1, 1, 1)
