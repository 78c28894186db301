"""ha.append_marks: a slave's lag in seconds is the age of the oldest append it has not
acknowledged; marks every link acknowledged are forgotten, bounded however long a slave
stays away."""

from __future__ import annotations

from broker_core.ha import append_marks
from broker_core.ha.append_marks import AppendMarks


def test_the_oldest_unacked_append_is_found_past_what_a_slave_holds():
    marks = AppendMarks(floor=100)
    for end, t in ((200, 1.0), (300, 2.0), (400, 3.5)):
        marks.mark(end, t)
    assert marks.oldest_unacked(100) == 1.0  # holds nothing past the floor: the first
    assert marks.oldest_unacked(250) == 2.0  # mid-record: the record ending at 300
    assert marks.oldest_unacked(300) == 3.5
    assert marks.oldest_unacked(400) is None  # caught up


def test_pruning_forgets_what_every_link_holds_and_no_link_keeps_nothing():
    marks = AppendMarks(floor=0)
    for i in range(1, 3001):
        marks.mark(i * 10, float(i))
    marks.prune(floor=20_000, log_end=30_000)  # every link holds 2,000 appends
    assert marks.floor == 20_000 and marks.oldest_unacked(20_000) == 2001.0
    marks.prune(floor=None, log_end=30_000)
    assert (marks.ends, marks.floor) == ([], 30_000)


def test_marks_stay_bounded_while_a_slave_is_away(monkeypatch):
    monkeypatch.setattr(append_marks, "MAX_APPEND_MARKS", 100)
    marks = AppendMarks(floor=0)
    for i in range(1, 1001):
        marks.mark(i, float(i))
    assert len(marks.ends) <= 100 and marks.floor > 0
    assert marks.oldest_unacked(marks.floor) == marks.times[0]
