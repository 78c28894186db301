"""Seed 000's latency SLA, under one name each: every check and picture uses these.

Sends average at most 3 ms and none takes longer than 20 ms. The whole
microseconds are the source (the metrics log stores µs, and exact counters
compare against them); seconds and milliseconds are derived, and a division of
exact integers gives the very float a literal 0.020 would.
"""

SLA_MEAN_US = 3_000  # seed 000: 3 ms average send latency
SLA_MAX_US = 20_000  # seed 000: no send slower than 20 ms

SLA_MEAN_S = SLA_MEAN_US / 1e6
SLA_MAX_S = SLA_MAX_US / 1e6
SLA_MEAN_MS = SLA_MEAN_US / 1e3
SLA_MAX_MS = SLA_MAX_US / 1e3
