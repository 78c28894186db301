"""The talk's published table, read back, and the grid picked from it."""

import pytest

from capacity.errors import CapacityError
from capacity.metaq2 import Cell, grid, published, published_for, talk_grid


def test_the_talks_grid_is_its_ten_cells_in_its_order():
    cells = talk_grid()
    assert len(cells) == 10
    assert cells[0] == Cell("async", 1024, 128)
    assert cells[-1] == Cell("sync", 10240, 512)
    assert [c.label for c in cells[:2]] == ["async 128 B x 1024", "async 256 B x 1024"]


def test_published_rows_carry_the_talks_figures():
    row = published_for(Cell("sync", 1024, 4096))
    assert (row.send_ms, row.send_tps, row.net_in_mb) == (7.5, 22_000, 91)
    assert row.send_tps_per_core == 22_000 / 16
    backlog = [r for r in published() if r.scenario == "backlog"]
    assert {r.scheduler: r.send_ms for r in backlog} == {"cfq": 65.0, "deadline": 5.3}
    assert published_for(Cell("sync", 1024, 1000)) is None


def test_a_grid_of_what_is_given_matches_the_talks_cells_first():
    assert grid(flush=["sync"]) == [c for c in talk_grid() if c.flush == "sync"]
    assert grid(sizes=[128], queues=[1024]) == [Cell("async", 1024, 128), Cell("sync", 1024, 128)]
    # a size the talk did not measure: every combination with the talk's other values
    assert grid(flush=["async"], sizes=[1000]) == [Cell("async", 1024, 1000),
                                                  Cell("async", 10240, 1000)]


def test_a_cell_out_of_range_is_refused_in_words():
    with pytest.raises(CapacityError, match="flush mode 'fast'"):
        Cell("fast", 1024, 128)
    with pytest.raises(CapacityError, match="0 queues"):
        Cell("sync", 0, 128)
