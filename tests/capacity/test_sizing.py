import pytest

from capacity.errors import CapacityError
from capacity.sizing import (
    SizingInputs,
    brokers_for_domain_loss,
    brokers_for_fuse,
    brokers_for_utilisation,
    disk_bytes_needed,
    littles_law,
    network_bits_per_s,
    size,
)


def test_hand_worked_broker_counts():
    # 10 M msgs/s at 100 k per broker:
    # utilisation 60 %: 10e6 / 60e3 = 166.7 -> 167, +1 spare = 168
    assert brokers_for_utilisation(10e6, 100e3, 0.6, 1) == 168
    # fuse isolates 30 %: 10e6 / 70e3 = 142.9 -> 143
    assert brokers_for_fuse(10e6, 100e3, 0.3) == 143
    # 3 domains: survivors 100, per domain ceil(100 / 2) = 50, total 150
    assert brokers_for_domain_loss(10e6, 100e3, 3) == 150
    # exact division must not round up from float noise: 7e6 / 70e3 = 100
    assert brokers_for_fuse(7e6, 100e3, 0.3) == 100


def test_hand_worked_disk_and_network():
    # 1e9 msgs/day of 1 KiB for 72 h, 2 replicas, 75 % water:
    # 1e9 * 1024 * 3 * 2 / 0.75 = 8.192e12 bytes
    assert disk_bytes_needed(1e9, 1024, 72, 2, 0.75) == pytest.approx(8.192e12)
    # 1e5 msgs/s of 1000 B = 0.8 Gbit/s produced; 2 replicas add 0.8 in and 0.8 out;
    # fan-out 15 delivers 12 Gbit/s
    net_in, net_out = network_bits_per_s(1e5, 1000, 2, 15)
    assert net_in == pytest.approx(1.6e9)
    assert net_out == pytest.approx(12.8e9)
    # Little: 10 M msgs/s at 3 ms = 30,000 in flight
    assert littles_law(10e6, 0.003) == pytest.approx(30_000)


def test_plan_picks_the_binding_constraint():
    plan = size(
        SizingInputs(
            target_rate=1e6, per_broker_rate=1e5, peak_day_messages=1e9, msg_bytes=1000,
            disk_bytes_per_broker=4e12, nic_bits_per_s=10e9, fanout=15,
        )
    )  # fmt: skip
    by_name = {c.name: c.brokers for c in plan.constraints}
    # utilisation: 1e6 / 6e4 = 16.7 -> 17 + 1 = 18; fuse: 1e6 / 7e4 = 14.3 -> 15
    # domain: 10 survivors over 2 domains -> 5 each, x3 = 15
    # disk: 1e9 * 1000 * 3 * 2 / 0.75 = 8e12 -> 2 brokers of 4 TB
    # network out: 1e6 * 8000 * 15 + 8e9 = 128e9 over 7e9 -> 18.3 -> 19
    assert by_name == {"utilisation": 18, "fuse": 15, "failure_domain": 15, "disk": 2, "network": 19}
    assert plan.binding == "network" and plan.brokers == 19
    assert plan.utilisation_at_peak == pytest.approx(1e6 / (19 * 1e5))
    assert plan.clients_needed == 47  # 3000 in flight / 64 per client


def test_day_volume_defaults_from_peak_and_ratio():
    i = SizingInputs(target_rate=3e5, per_broker_rate=1e5, peak_to_mean=3)
    assert i.day_messages == pytest.approx(1e5 * 86400)


@pytest.mark.parametrize(
    "field,value",
    [("target_rate", 0), ("per_broker_rate", -1), ("target_utilisation", 1.5),
     ("fuse_reserve", 1.0), ("water", 0), ("replicas", 0), ("failure_domains", 0)],
)  # fmt: skip
def test_bad_input(field, value):
    kwargs = {"target_rate": 1e6, "per_broker_rate": 1e5, field: value}
    with pytest.raises(CapacityError, match=field):
        size(SizingInputs(**kwargs))
