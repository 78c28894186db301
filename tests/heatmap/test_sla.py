"""The Double-11 talk's SLA: one name each, the same floats in every unit."""

from heatmap import sla


def test_sla_forms_agree_exactly():
    assert (sla.SLA_MEAN_S, sla.SLA_MAX_S) == (0.003, 0.020)
    assert (sla.SLA_MEAN_MS, sla.SLA_MAX_MS) == (3.0, 20.0)
    assert (sla.SLA_MEAN_US, sla.SLA_MAX_US) == (3_000, 20_000)
    assert round(sla.SLA_MAX_S * 1e6) == sla.SLA_MAX_US


def test_the_fuse_cap_is_seed_000s_floor_of_30_percent_for_every_size():
    from heatmap.sla import brokers_serving, fuse_cap

    assert [fuse_cap(n) for n in range(1, 11)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert all(brokers_serving(n) == n - fuse_cap(n) >= 0.7 * n for n in range(1, 1000))
    assert fuse_cap(10, 0.0) == 0 and fuse_cap(100) == 30
