import numpy as np

from heatmap import LatencyHistogram
from heatmap.op_latency import OpLatency
from heatmap.sla import SLA_MAX_S


def test_over_sla_is_exact_where_a_bucket_could_not_say():
    span = OpLatency()
    span.record(SLA_MAX_S)  # on the line: not over
    span.record(SLA_MAX_S * 1.0001)  # shares a bucket with 20 ms, but over
    span.record_many(np.array([0.001, 0.5, SLA_MAX_S]))
    assert span.hist.count == 5
    assert span.over_sla == 2


def test_merge_adds_both_the_histogram_and_the_count():
    a, b = OpLatency(), OpLatency()
    a.record(0.030)
    b.record(0.001)
    b.record(0.040)
    a.merge(b)
    assert a.hist.count == 3 and a.over_sla == 2
    assert b.hist.count == 2 and b.over_sla == 1  # the other left as it was


def test_summary_names_its_units_and_is_none_when_empty():
    h = LatencyHistogram()
    assert h.summary() == {"count": 0, "mean": None, "p50": None, "p99": None,
                           "p999": None, "max": None}
    h.record_many([0.001] * 99 + [0.1])
    s = h.summary(suffix="_s")
    assert s["count"] == 100 and s["max_s"] == 0.1
    assert s["p50_s"] == h.quantile(0.5) and s["p999_s"] == 0.1
    assert abs(s["mean_s"] - (0.099 + 0.1) / 100) < 1e-12
