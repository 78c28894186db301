"""Seed 000's SLA: one name each, the same floats in every unit."""

from heatmap import sla


def test_sla_forms_agree_exactly():
    assert (sla.SLA_MEAN_S, sla.SLA_MAX_S) == (0.003, 0.020)
    assert (sla.SLA_MEAN_MS, sla.SLA_MAX_MS) == (3.0, 20.0)
    assert (sla.SLA_MEAN_US, sla.SLA_MAX_US) == (3_000, 20_000)
    assert round(sla.SLA_MAX_S * 1e6) == sla.SLA_MAX_US
