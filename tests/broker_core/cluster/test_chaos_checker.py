"""The chaos checker against recorded histories with known faults: it must find each."""

import json

from broker_core.cluster.chaos_checker import check, load_history


def send(t, key, seq, ordered=False):
    return {"t": t, "type": "send", "key": key, "seq": seq, "ordered": ordered}


def ack(t, key, seq, master="group-1-a", group="group-1"):
    return {"t": t, "type": "ack", "key": key, "seq": seq, "group": group, "master": master,
            "status": "SEND_OK"}


def read(key, seq, offset, queue=0, group="group-1"):
    return {"t": 99.0, "type": "read", "key": key, "seq": seq, "group": group,
            "queue": queue, "offset": offset}


def clean_history():
    h = [{"t": 0.0, "type": "master", "group": "group-1", "master": "group-1-a", "epoch": 1}]
    for seq in range(5):
        h += [send(seq, "k", seq, ordered=True), ack(seq + 0.01, "k", seq)]
    h += [read("k", seq, seq) for seq in range(5)]
    h += [{"t": 50.0, "type": "deliver", "key": "k", "seq": seq} for seq in range(5)]
    return h


def test_a_clean_history_passes():
    r = check(clean_history())
    assert r.ok and r.acked == 5 and r.lost == 0 and r.order_violations == 0
    assert r.duplicates_stored == r.duplicates_delivered == r.split_brain_acks == 0


def test_it_finds_a_lost_acknowledged_message():
    h = [e for e in clean_history() if not (e["type"] == "read" and e["seq"] == 3)]
    r = check(h)
    assert not r.ok and r.lost == 1 and r.lost_sample == ["k#3"]


def test_it_counts_duplicates_stored_and_delivered():
    h = clean_history() + [read("k", 2, 7), {"t": 51.0, "type": "deliver", "key": "k",
                                             "seq": 4}]
    r = check(h)
    assert r.ok  # at-least-once: counted, not failed
    assert r.duplicates_stored == 1 and r.duplicates_delivered == 1


def test_it_finds_a_reordering_of_an_ordered_key_and_ignores_unordered_ones():
    h = [e for e in clean_history() if e["type"] != "read"]
    h += [read("k", 0, 0), read("k", 2, 1), read("k", 1, 2), read("k", 3, 3), read("k", 4, 4)]
    r = check(h)
    assert r.order_violations == 1 and "#1 after #2" in r.order_sample[0] and not r.ok
    for e in h:
        if e["type"] == "send":
            e["ordered"] = False
    assert check(h).order_violations == 0


def test_it_finds_an_ack_from_a_deposed_master_and_times_the_failover():
    h = clean_history()
    h += [{"t": 10.0, "type": "master", "group": "group-1", "master": "group-1-b", "epoch": 2},
          send(11.0, "k", 10), ack(11.2, "k", 10, master="group-1-a"),  # deposed: split brain
          send(12.0, "k", 11), ack(12.5, "k", 11, master="group-1-b"),
          read("k", 10, 10), read("k", 11, 11)]
    r = check(h)
    assert r.split_brain_acks == 1 and not r.ok
    assert "acked by group-1-a" in r.split_brain_sample[0]
    assert r.failovers == [{"group": "group-1", "from": "group-1-a", "to": "group-1-b",
                            "epoch": 2, "at": 10.0, "first_ack_after_s": 2.5,
                            "unavailable_s": 0.0}]


def test_an_ack_by_the_next_master_seen_before_its_record_is_not_split_brain():
    """The watcher learns of a new master a little after the producer does."""
    h = clean_history()
    h += [send(10.0, "k", 10), ack(10.1, "k", 10, master="group-1-b"),
          {"t": 10.3, "type": "master", "group": "group-1", "master": "group-1-b", "epoch": 2},
          read("k", 10, 10)]
    r = check(h)
    assert r.split_brain_acks == 0 and r.ok


def test_unavailability_runs_from_the_first_failed_send_to_the_next_ack(tmp_path):
    def fail(t, seq, group="group-1"):
        return {"t": t, "type": "fail", "key": "k", "seq": seq, "group": group,
                "reason": "timed out"}

    h = clean_history() + [send(20.0, "k", 20), fail(23.0, 20), send(21.0, "k", 21),
                           fail(24.0, 21), send(21.5, "k", 30), fail(22.0, 30, "group-2"),
                           send(24.1, "k", 31), ack(24.2, "k", 31, "group-2-a", "group-2"),
                           {"t": 22.5, "type": "master", "group": "group-1",
                            "master": "group-1-b", "epoch": 2},
                           send(24.5, "k", 22), ack(24.6, "k", 22, "group-1-b"),
                           read("k", 22, 22), read("k", 31, 0, group="group-2")]
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in h) + "\n")
    r = check(load_history(path))
    assert r.failed == 3 and r.unavailable == [  # per group: the other group's acks
        {"group": "group-2", "from": 21.5, "to": 24.2, "seconds": 2.7},  # do not end it
        {"group": "group-1", "from": 20.0, "to": 24.6, "seconds": 4.6}]
    assert [fo["unavailable_s"] for fo in r.failovers] == [4.6]  # the window around it


def test_fuse_isolations_are_explained_by_a_fault_on_their_path_or_counted():
    loss = {"kind": "loss", "node": "group-2-a", "pct": 5.0, "groups": ["group-2"]}
    h = clean_history() + [
        {"t": 10.0, "type": "nemesis", "action": "start", "fault": loss},
        {"t": 10.6, "type": "fuse", "action": "isolate", "group": "group-2", "reason": "slow"},
        {"t": 14.0, "type": "nemesis", "action": "stop", "fault": loss},
        {"t": 30.0, "type": "fuse", "action": "isolate", "group": "group-3", "reason": "slow"}]
    r = check(h)
    assert [(i["group"], i["fault"]) for i in r.fuse_isolations] == [("group-2", "loss"),
                                                                      ("group-3", None)]
    assert r.fuse_unjustified == 1
    assert r.faults[0]["fuse_detect_s"] == 0.6
    again = dict(loss, node="group-2-b")  # within the isolation's minute: isolated already
    h += [{"t": 40.0, "type": "nemesis", "action": "start", "fault": again},
          {"t": 44.0, "type": "nemesis", "action": "stop", "fault": again},
          {"t": 70.6, "type": "fuse", "action": "release", "group": "group-2"}]
    assert check(h).faults[1]["fuse_detect_s"] == 0.0


def out(key, seq, offset, made_from, half, queue=0, group="group-1"):
    return {"t": 120.0, "type": "out", "key": key, "seq": seq, "group": group,
            "queue": queue, "offset": offset, "made_from": made_from, "half": half}


def pipeline_history():
    """The clean history's five inputs (chaos:0:0..4) through the exactly-once pipeline:
    one commit aborted (fenced) before the two that made the output."""
    h = clean_history()
    h += [{"t": 60.0, "type": "xform", "queue": ["group-1", 0], "begin": 0, "end": 5,
           "outcome": "aborted", "halves": ["Z1", "Z2"]},
          {"t": 61.0, "type": "xform", "queue": ["group-1", 0], "begin": 0, "end": 3,
           "outcome": "committed", "halves": ["H0", "H1", "H2"]},
          {"t": 62.0, "type": "xform", "queue": ["group-1", 0], "begin": 3, "end": 5,
           "outcome": "committed", "halves": ["H3", "H4"]},
          {"t": 119.0, "type": "pipeline", "drained": True}]
    return h + [out("k", s, s, f"chaos:0:{s}", f"H{s}") for s in range(5)]


def test_the_pipeline_passes_when_each_input_is_output_once_in_order():
    r = check(pipeline_history())
    p = r.pipeline
    assert r.ok and (p["inputs"], p["outputs"], p["commits"], p["aborted"]) == (5, 5, 2, 1)
    assert p["lost"] == p["duplicated"] == p["aborted_reads"] == p["order_violations"] == 0


def test_the_pipeline_finds_lost_duplicated_aborted_and_reordered_output():
    h = [e for e in pipeline_history() if not (e["type"] == "out" and e["seq"] == 1)]
    r = check(h)
    assert not r.ok and r.pipeline["lost"] == 1 and r.pipeline["samples"]["lost"] == ["k#1"]
    h = pipeline_history() + [out("k", 4, 5, "chaos:0:4", "Z2")]  # a fenced half, read
    p = check(h).pipeline
    assert (p["duplicated"], p["aborted_reads"]) == (1, 1)
    assert p["samples"]["aborted_reads"] == ["k#4"]
    h = [e for e in pipeline_history() if e["type"] != "out"]
    h += [out("k", s, i, f"chaos:0:{s}", f"H{s}") for i, s in enumerate((0, 2, 1, 3, 4))]
    p = check(h).pipeline
    assert p["order_violations"] == 1 and p["samples"]["order"] == [
        "group-1/0 from input queue 0"]
    h = [e if e["type"] != "pipeline" else {**e, "drained": False} for e in pipeline_history()]
    assert not check(h).ok  # the transforms never caught up: not a pass
