"""Each mode's measured recovery side by side: the drills grouped by the mode they ran
in, assessed at one MTBF and target, and the sentence that says which mode a night
needs."""

import json

import pytest

from capacity.errors import CapacityError
from capacity.recovery_modes import compare, headline, needs, read_modes, side_by_side


def write(path, drills):
    path.write_text(json.dumps(drills))
    return str(path)


def test_drills_are_grouped_by_the_mode_they_ran_in(tmp_path):
    a = write(tmp_path / "a.json", [{"failover_s": 0.1, "lost": 0, "consensus": "controller"},
                                    {"failover_s": 0.3, "lost": 0}])  # older output: no mode
    b = write(tmp_path / "b.json", {"drills": [{"failover_s": 0.8, "mode": "raft"},
                                               {"failover_s": 1.2, "mode": "raft"},
                                               {"failover_s": 0.9, "mode": "raft"}]})
    modes = read_modes([a, b])
    assert {m: (r.mttr_s, r.drills) for m, r in modes.items()} == {
        "controller": (pytest.approx(0.2), 2), "raft": (0.9, 3)}


def test_a_mode_that_lost_an_acknowledged_message_is_no_candidate(tmp_path):
    f = write(tmp_path / "d.json", [{"failover_s": 0.1, "lost": 3, "consensus": "controller"},
                                    {"failover_s": 0.9, "lost": 0, "consensus": "raft"}])
    modes = read_modes([f])
    verdicts = compare(86_400, modes, target=0.9999)
    assert [(v.mode, v.target_met) for v in verdicts] == [("raft", True), ("controller", False)]
    assert headline(modes).mttr_s == 0.9
    said = needs(verdicts, 86_400, target=0.9999)
    assert said.startswith("raft meets 99.99 %") and "controller lost 3 acknowledged" in said


def test_the_sentence_names_the_mode_that_meets_the_target_and_why_the_other_does_not():
    from capacity.availability import MeasuredRecovery

    modes = {"controller": MeasuredRecovery(0.11, 10, (), 0),
             "raft": MeasuredRecovery(0.80, 10, (), 0)}
    # one failure a day at five nines allows 0.864 s: both meet it
    assert needs(compare(86_400, modes), 86_400).startswith(
        "every mode measured meets 99.999 %; controller recovers fastest (0.11 s")
    # a failure every 8 hours allows 0.29 s: only the controller
    said = needs(compare(28_800, modes), 28_800)
    assert said == ("controller meets 99.999 %; raft does not (0.80 s to recover, "
                    "0.29 s allowed)")
    # a failure an hour allows 0.036 s: neither
    assert needs(compare(3_600, modes), 3_600).startswith(
        "no mode measured meets 99.999 %: the fastest, controller, recovers in 0.11 s")
    assert side_by_side(86_400, {"raft": modes["raft"]}) == {}
    doc = side_by_side(86_400, modes)
    assert [m["mode"] for m in doc["modes"]] == ["controller", "raft"]


def test_a_mode_without_a_recovery_is_refused_by_name(tmp_path):
    f = write(tmp_path / "d.json", [{"failover_s": None, "consensus": "raft"}])
    with pytest.raises(CapacityError, match="raft drills: drill #1 never saw"):
        read_modes([f])
    g = write(tmp_path / "e.json", [3])
    with pytest.raises(CapacityError, match="result #1 is not an object"):
        read_modes([g])
