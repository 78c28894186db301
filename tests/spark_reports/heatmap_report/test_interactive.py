"""The interactive page's pieces: bucket labels, where the SLA lines sit, the data block."""

from __future__ import annotations

import json
import math
import re

import pandas as pd

from heatmap.layout import bucket_index, bucket_lower, bucket_upper
from spark_reports.heatmap_report.interactive import (
    bucket_labels,
    json_block,
    row_of,
    sparse,
)


def test_labels_name_each_bucket_range_and_the_zero_bucket():
    lo = bucket_index(0.0009)
    labels = bucket_labels(lo, lo + 1)
    assert labels[0].endswith(f"{bucket_upper(lo) * 1e6:.3g} µs")
    assert labels[0].startswith(f"{bucket_lower(lo) * 1e6:.3g} µs")
    assert bucket_labels(-160, -160) == ["≤ 0.954 µs"]
    assert bucket_labels(bucket_index(0.02), bucket_index(0.02))[0].endswith("20.3 ms")


def test_sla_lines_sit_inside_the_bucket_holding_them():
    lo = bucket_index(0.0005)
    for seconds in (0.003, 0.020):
        r = row_of(seconds, lo)
        i = bucket_index(seconds) - lo  # its bucket's row spans [i - 0.5, i + 0.5]
        assert i - 0.5 < r <= i + 0.5
    assert math.isclose(row_of(bucket_upper(lo + 3), lo), 3.5)  # an upper bound: the row's top


def test_cells_are_flat_in_time_then_bucket_order_and_the_block_cannot_end_early():
    cells = pd.DataFrame({"t": [120, 60, 60], "bucket": [-70, -72, -75], "count": [5, 0, 7]})
    assert sparse(cells, t0=60, step=60, lo=-80) == [0, 5, 7, 1, 10, 5]  # the 0 count dropped
    block = json_block("x", {"name": "</script><script>alert(1)</script>"})
    assert block.count("</script>") == 1
    inner = re.match(r'<script type="application/json" id="x">(.*)</script>$', block).group(1)
    assert json.loads(inner)["name"].startswith("</script>")
