"""Epoch histories: the offset two replicas agree on, and what a returning master cuts."""

import pytest

from broker_core.ha.epochs import EpochError, EpochFile, EpochHistory, consistent_end


def h(*entries):
    return EpochHistory(list(entries))


def test_same_lineage_agrees_up_to_the_shorter_log():
    assert consistent_end(h((1, 0)), 500, h((1, 0)), 800) == 500
    assert consistent_end(h((1, 0)), 900, h((1, 0)), 800) == 800


def test_old_master_cuts_what_it_wrote_after_the_new_epoch_began():
    # A wrote [0, 1000) as master of epoch 1; B took over at 700 (all it had)
    assert consistent_end(h((1, 0)), 1000, h((1, 0), (2, 700)), 1500) == 700


def test_chain_of_failovers():
    # A (1) -> B (2 at 700) -> C (3 at 900); A comes back holding 1000
    assert consistent_end(h((1, 0)), 1000, h((1, 0), (2, 700), (3, 900)), 2000) == 700
    # a slave of B that got to 850 agrees with C up to 850
    assert consistent_end(h((1, 0), (2, 700)), 850, h((1, 0), (2, 700), (3, 900)), 2000) == 850


def test_slave_that_adopted_a_history_it_had_not_reached():
    # adopted B's (2, 700) while at 500; all its bytes are epoch 1's
    assert consistent_end(h((1, 0), (2, 700)), 500, h((1, 0), (2, 700), (3, 900)), 950) == 500


def test_nothing_shared_starts_over():
    assert consistent_end(h(), 300, h((1, 0)), 800) == 0
    assert consistent_end(h((5, 0)), 300, h((1, 0)), 800) == 0


def test_begin_drops_entries_above_the_log_end():
    hist = h((1, 0), (2, 700))
    hist.begin(3, 500)  # promoted before reaching epoch 2's first byte
    assert hist.entries == [(1, 0), (3, 500)]
    with pytest.raises(EpochError):
        hist.begin(2, 600)


def test_file_round_trip_and_bad_order(tmp_path):
    f = EpochFile(tmp_path / "epochs.json")
    f.begin(1, 0)
    f.begin(4, 4096)
    assert EpochFile(tmp_path / "epochs.json").history.entries == [(1, 0), (4, 4096)]
    with pytest.raises(EpochError):
        EpochHistory.from_list([[2, 0], [1, 10]])
