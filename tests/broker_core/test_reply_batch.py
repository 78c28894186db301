"""Answers released inside `at_once` leave when it ends, once per writer, before what
follows it; outside, the caller writes them at the loop turn's end as it always did."""

from __future__ import annotations

from broker_core import reply_batch


def test_answers_released_in_a_block_leave_at_its_end_once_per_writer():
    written: list[str] = []
    a, b = object(), object()
    assert not reply_batch.defer(a, lambda: written.append("a"))  # outside: not taken
    with reply_batch.at_once():
        assert reply_batch.defer(a, lambda: written.append("a"))
        assert reply_batch.defer(a, lambda: written.append("a again"))  # (one write each)
        with reply_batch.at_once():  # nested: the outer block writes
            assert reply_batch.defer(b, lambda: written.append("b"))
        assert written == []
    written.append("indexed for readers")
    assert written == ["a", "b", "indexed for readers"]
    assert not reply_batch.defer(a, lambda: None)


def test_a_block_that_raises_still_writes_what_it_released():
    written: list[str] = []
    try:
        with reply_batch.at_once():
            reply_batch.defer(object(), lambda: written.append("answer"))
            raise RuntimeError("a bug after the release")
    except RuntimeError:
        pass
    assert written == ["answer"]
