"""One way to write a rate, everywhere the console shows one (console.tui.format.rate)."""

import pytest

from console.tui.format import rate


@pytest.mark.parametrize(("per_s", "shown"), [
    (0, "0/s"), (12.4, "12/s"), (999.4, "999/s"),
    # the issue: 999.6 read "1000/s" on one screen beside "1.0k/s" on another
    (999.6, "1.0k/s"), (1000, "1.0k/s"), (1050, "1.1k/s"), (9949, "9.9k/s"),
    (9990, "10k/s"), (10_000, "10k/s"), (1_234_567, "1,235k/s"),
    (None, "-"), (float("nan"), "-"),
    (-291, "-"),  # a rate is never negative: not known
])  # fmt: skip
def test_a_rate_is_written_one_way(per_s, shown):
    assert rate(per_s) == shown


def test_a_change_per_second_is_signed_in_the_same_units():
    assert [rate(v, signed=True) for v in (12.3, -1500, 0, -291)] == ["+12/s", "-1.5k/s", "0/s",
                                                                       "-291/s"]
