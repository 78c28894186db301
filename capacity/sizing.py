"""Sizing: brokers, disk and network for a target peak, plus Little's law.

Every constraint is computed on its own and the plan takes the largest, so
the report can say which one binds:

- utilisation: normal operation at `target_utilisation` of the measured
  per-broker rate, with `spares` brokers down (N+1 when spares = 1):
  ceil(R / (c u)) + spares;
- fuse: the fuse may isolate up to `fuse_reserve` (30 %, the Double-11 talk) of the
  brokers; the rest must carry the peak at no more than their measured
  capacity: ceil(R / (c (1 - reserve)));
- failure domain: brokers spread evenly over D domains; losing one leaves
  N (D-1)/D that must carry the peak at measured capacity:
  ceil(R / c * D / (D-1)), rounded up to a multiple of D;
- disk: `retention_hours` (72 h) of the peak day's volume, times replicas,
  kept under the `water` level (75 %) of each broker's disk;
- network: producer bytes in, replication between replicas, and deliveries
  out with fan-out (the Taobao talk: receive : deliver = 1 : 15) under `nic_utilisation`
  of each broker's NIC, the busier direction deciding.

"c" is the measured per-broker rate (msgs/s) at which latency still meets
the SLA (e.g. from a USL fit of a load test); R the target peak rate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from capacity.errors import CapacityError
from heatmap.sla import FUSE_CAP_RATIO, SLA_MEAN_S

SECONDS_PER_DAY = 86_400.0


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise CapacityError(f"{name} must be a number > 0, got {value}")


def _fraction(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = (0 <= value < 1) if allow_zero else (0 < value <= 1)
    if not ok:
        interval = "[0, 1)" if allow_zero else "(0, 1]"
        raise CapacityError(f"{name} must be within {interval}, got {value}")


@dataclass(frozen=True)
class SizingInputs:
    target_rate: float  # msgs/s at the peak second
    per_broker_rate: float  # measured msgs/s one broker sustains within SLA
    target_utilisation: float = 0.6
    fuse_reserve: float = FUSE_CAP_RATIO
    spares: int = 1
    failure_domains: int = 3
    msg_bytes: float = 1024.0
    peak_day_messages: float | None = None  # default: target_rate * 86400 / peak_to_mean
    peak_to_mean: float = 3.0
    retention_hours: float = 72.0
    replicas: int = 2
    disk_bytes_per_broker: float = 4e12
    water: float = 0.75
    fanout: float = 15.0
    nic_bits_per_s: float = 10e9
    nic_utilisation: float = 0.7
    avg_latency_s: float = SLA_MEAN_S  # the Double-11 talk: 3 ms average send
    client_concurrency: int = 64  # requests one client keeps in flight

    def validate(self) -> None:
        for name in (
            "target_rate", "per_broker_rate", "msg_bytes", "peak_to_mean", "retention_hours",
            "disk_bytes_per_broker", "fanout", "nic_bits_per_s", "avg_latency_s",
        ):  # fmt: skip
            _positive(name, getattr(self, name))
        _fraction("target_utilisation", self.target_utilisation)
        _fraction("water", self.water)
        _fraction("nic_utilisation", self.nic_utilisation)
        _fraction("fuse_reserve", self.fuse_reserve, allow_zero=True)
        if self.peak_day_messages is not None:
            _positive("peak_day_messages", self.peak_day_messages)
        if self.spares < 0:
            raise CapacityError(f"spares must be >= 0, got {self.spares}")
        if self.failure_domains < 1:
            raise CapacityError(f"failure_domains must be >= 1, got {self.failure_domains}")
        if self.replicas < 1:
            raise CapacityError(f"replicas must be >= 1, got {self.replicas}")
        if self.client_concurrency < 1:
            raise CapacityError(f"client_concurrency must be >= 1, got {self.client_concurrency}")

    @property
    def day_messages(self) -> float:
        if self.peak_day_messages is not None:
            return self.peak_day_messages
        return self.target_rate * SECONDS_PER_DAY / self.peak_to_mean


@dataclass(frozen=True)
class Constraint:
    name: str
    brokers: int
    why: str


@dataclass(frozen=True)
class SizingPlan:
    inputs: SizingInputs
    constraints: list[Constraint]
    brokers: int
    binding: str
    disk_bytes_needed: float
    network_in_bits_per_s: float
    network_out_bits_per_s: float
    per_broker_in_bits_per_s: float
    per_broker_out_bits_per_s: float
    utilisation_at_peak: float
    in_flight_requests: float
    clients_needed: int
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def ceil_div(a: float, b: float) -> int:
    """ceil(a / b), tolerant of float noise (6.0000000001 -> 6)."""
    return max(0, math.ceil(round(a / b, 9)))


def brokers_for_utilisation(rate: float, per_broker: float, util: float, spares: int) -> int:
    return ceil_div(rate, per_broker * util) + spares


def brokers_for_fuse(rate: float, per_broker: float, reserve: float) -> int:
    # The continuous share 1 - r, not heatmap.sla.brokers_serving's floor: a plan for
    # next year must not count on the cap rounding down at this year's size (and it is
    # the larger count: N(1 - r) <= N - floor(rN)).
    return ceil_div(rate, per_broker * (1.0 - reserve))


def brokers_for_domain_loss(rate: float, per_broker: float, domains: int) -> int:
    if domains == 1:
        return ceil_div(rate, per_broker)  # nothing survives a lost domain; size as one
    survivors = ceil_div(rate, per_broker)
    per_domain = math.ceil(survivors / (domains - 1))
    return per_domain * domains


def disk_bytes_needed(day_messages: float, msg_bytes: float, retention_hours: float,
                      replicas: int, water: float) -> float:  # fmt: skip
    """Raw disk for `retention_hours` of the peak day's volume, all replicas, under water."""
    return day_messages * msg_bytes * (retention_hours / 24.0) * replicas / water


def network_bits_per_s(rate: float, msg_bytes: float, replicas: int, fanout: float) -> tuple[float, float]:
    """Cluster-wide (in, out) bits/s: producers + replication in; deliveries + replication out."""
    produce = rate * msg_bytes * 8.0
    replication = produce * (replicas - 1)
    return produce + replication, produce * fanout + replication


def littles_law(rate: float, latency_s: float) -> float:
    """Requests in flight L = lambda * W."""
    _positive("rate", rate)
    _positive("latency", latency_s)
    return rate * latency_s


def size(inputs: SizingInputs) -> SizingPlan:
    """Brokers needed for the peak and which constraint binds."""
    inputs.validate()
    i = inputs
    r, c = i.target_rate, i.per_broker_rate
    disk = disk_bytes_needed(i.day_messages, i.msg_bytes, i.retention_hours, i.replicas, i.water)
    net_in, net_out = network_bits_per_s(r, i.msg_bytes, i.replicas, i.fanout)
    nic_budget = i.nic_bits_per_s * i.nic_utilisation
    constraints = [
        Constraint(
            "utilisation",
            brokers_for_utilisation(r, c, i.target_utilisation, i.spares),
            f"peak at {i.target_utilisation:.0%} of {c:,.0f} msgs/s per broker, +{i.spares} spare",
        ),
        Constraint(
            "fuse",
            brokers_for_fuse(r, c, i.fuse_reserve),
            f"peak on the {1 - i.fuse_reserve:.0%} left when the fuse isolates {i.fuse_reserve:.0%}",
        ),
        Constraint(
            "failure_domain",
            brokers_for_domain_loss(r, c, i.failure_domains),
            f"peak on {i.failure_domains - 1} of {i.failure_domains} failure domains",
        ),
        Constraint(
            "disk",
            ceil_div(disk, i.disk_bytes_per_broker),
            f"{i.retention_hours:g} h of the peak day x{i.replicas} replicas under {i.water:.0%} water",
        ),
        Constraint(
            "network",
            ceil_div(max(net_in, net_out), nic_budget),
            f"max(in, out) with fan-out 1:{i.fanout:g} under {i.nic_utilisation:.0%} of the NIC",
        ),
    ]
    binding = max(constraints, key=lambda k: k.brokers)  # first wins a tie: list order
    n = max(binding.brokers, 1)
    in_flight = littles_law(r, i.avg_latency_s)
    return SizingPlan(
        inputs=i,
        constraints=constraints,
        brokers=n,
        binding=binding.name,
        disk_bytes_needed=disk,
        network_in_bits_per_s=net_in,
        network_out_bits_per_s=net_out,
        per_broker_in_bits_per_s=net_in / n,
        per_broker_out_bits_per_s=net_out / n,
        utilisation_at_peak=r / (n * c),
        in_flight_requests=in_flight,
        clients_needed=ceil_div(in_flight, i.client_concurrency),
    )
