"""The Double-11 talk's latency SLA and the fuse's rules, under one name each: every check,
picture, model and plan uses these (any package may import this module).

Sends average at most 3 ms and none takes longer than 20 ms. The whole
microseconds are the source (the metrics log stores µs, and exact counters
compare against them); seconds and milliseconds are derived, and a division of
exact integers gives the very float a literal 0.020 would.
"""

import math

SLA_MEAN_US = 3_000  # the Double-11 talk: 3 ms average send latency
SLA_MAX_US = 20_000  # the Double-11 talk: no send slower than 20 ms

SLA_MEAN_S = SLA_MEAN_US / 1e6
SLA_MAX_S = SLA_MAX_US / 1e6
SLA_MEAN_MS = SLA_MEAN_US / 1e3
SLA_MAX_MS = SLA_MAX_US / 1e3

# The Double-11 talk's fuse (在线熔断): at most 30 % of the brokers isolated (rule 1), each for
# one minute (rules 2-3); the isolated earliest serve again past the cap (rule 4).
FUSE_CAP_RATIO = 0.3
FUSE_ISOLATION_S = 60.0
HISTORY_S = 300  # the seconds of per-second history a broker keeps and shows


def fuse_cap(brokers: int, ratio: float = FUSE_CAP_RATIO) -> int:
    """How many of `brokers` the fuse may isolate: floor(ratio x N), 0 below 4 at 30 %
    (the rounding guards 0.3 x 10 = 3.0000000000000004)."""
    return math.floor(round(ratio * brokers, 9))


def brokers_serving(brokers: int, ratio: float = FUSE_CAP_RATIO) -> int:
    """The brokers still serving when the fuse has isolated all it may."""
    return brokers - fuse_cap(brokers, ratio)
