"""The shape of a synthetic Double-11 night, as pure numpy functions of time.

Traffic: a diurnal curve (trough before dawn, evening high) times the 00:00
flash peak (a ramp to 10-20x within seconds, decaying over the first hour).
Latency per op: a lognormal body whose median grows with load, a slow tail
that fattens near saturation, PageCache stalls of 200-2000 ms on a few
brokers, GC pauses everywhere, and one broker that degrades through the night.
Each broker has its own character (body median and spread, tail weight and
reach), as hosts, disks and neighbours differ, so no two brokers' p99 agree.
Everything random comes from generators seeded by (seed, purpose), so a seed
always gives the same night.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

# Relative traffic by hour of the peak's clock (00:00 is the peak instant).
_DIURNAL_HOURS = np.arange(25, dtype=float)
_DIURNAL_LEVEL = np.array(
    [0.90, 0.70, 0.45, 0.30, 0.20, 0.17, 0.20, 0.30, 0.45, 0.60, 0.68, 0.70, 0.68,
     0.66, 0.68, 0.70, 0.70, 0.70, 0.72, 0.80, 0.90, 0.98, 1.00, 0.97, 0.90]
)  # fmt: skip

FLASH_RAMP_S = 8.0  # seconds from 00:00:00 to the top of the flash peak
FLASH_DECAY_S = 900.0  # e-folding time: ~2 % of the excess is left after an hour
DEFAULT_PEAK = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)
LEAD_IN_S = 2 * 3600  # a long night starts this long before the peak (22:00)


@dataclass(frozen=True)
class OpShape:
    """Latency and volume of one operation type on a healthy, idle broker."""

    median_s: float  # body median at zero load
    sigma: float  # body spread, natural-log units
    calls_per_msg: float  # calls per message (a pull fetches a batch)
    stall_share: float  # how much of a PageCache stall this op feels (0..1)


OP_SHAPES = {
    "send": OpShape(median_s=0.00035, sigma=0.30, calls_per_msg=1.0, stall_share=1.0),
    "pull": OpShape(median_s=0.00025, sigma=0.30, calls_per_msg=1 / 16, stall_share=0.4),
    "flush": OpShape(median_s=0.0020, sigma=0.40, calls_per_msg=0.0, stall_share=1.0),
    "replicate": OpShape(median_s=0.0006, sigma=0.35, calls_per_msg=1 / 8, stall_share=0.5),
    "commit": OpShape(median_s=0.0003, sigma=0.30, calls_per_msg=1.0, stall_share=0.8),
    "ack": OpShape(median_s=0.0002, sigma=0.25, calls_per_msg=1 / 16, stall_share=0.2),
}
FLUSHES_PER_S = 100.0  # group commit: flush calls per second regardless of load


@dataclass(frozen=True)
class Double11Config:
    brokers: int
    hours: float
    start: datetime = datetime(2026, 11, 10, 22, 0, tzinfo=UTC)
    seed: int = 11
    ops: tuple[str, ...] = ("send", "pull")
    cluster: str = "double11"
    base_rate: float = 8000.0  # sends/s of an average broker at the evening high
    consumer_capacity: float = 6.0  # consumers keep up with this many x base_rate
    peak: datetime | None = None  # default: the first midnight (UTC) at or after start

    @property
    def seconds(self) -> int:
        return int(round(self.hours * 3600))

    @property
    def peak_time(self) -> datetime:
        if self.peak is not None:
            return self.peak
        midnight = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight if midnight == self.start else midnight + timedelta(days=1)

    def broker_names(self) -> list[str]:
        width = max(3, len(str(self.brokers - 1)))
        return [f"broker-{i:0{width}d}" for i in range(self.brokers)]


def default_start(hours: float, peak: datetime = DEFAULT_PEAK) -> datetime:
    """First second of a night of `hours` with no --start: the flash peak in view.

    Short ranges are centred on the peak (1 h -> 23:30..00:30); from 4 h on
    the night starts at 22:00, so the evening ramp comes first and the rest
    is the peak's decay and the night after.
    """
    return peak - timedelta(seconds=int(min(hours * 3600 / 2, LEAD_IN_S)))


def rng_for(seed: int, *purpose: int) -> np.random.Generator:
    """An independent generator per (seed, purpose), stable across runs."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=purpose))


def diurnal(seconds_from_peak: np.ndarray) -> np.ndarray:
    hour = np.mod(seconds_from_peak / 3600.0, 24.0)
    return np.interp(hour, _DIURNAL_HOURS, _DIURNAL_LEVEL)


def flash_multiplier(seconds_from_peak: np.ndarray, peak_factor: float) -> np.ndarray:
    """1 before 00:00; a ramp to `peak_factor` in seconds, then exponential decay."""
    s = np.asarray(seconds_from_peak, dtype=float)
    ramp = np.clip(s / FLASH_RAMP_S, 0.0, 1.0)
    decay = np.exp(-np.clip(s - FLASH_RAMP_S, 0.0, None) / FLASH_DECAY_S)
    return 1.0 + (peak_factor - 1.0) * ramp * decay * (s >= 0)


@dataclass
class Night:
    """Everything about a night that is fixed before the first second is drawn."""

    config: Double11Config
    peak_factor: float
    broker_weight: np.ndarray  # (B,) share of traffic, mean 1
    msg_bytes: np.ndarray  # (B,) average message size
    stall_brokers: np.ndarray  # brokers whose PageCache stalls
    degrading_broker: int
    degrade_start_s: float  # seconds from start when its decline begins
    # Each broker's latency character, (B,) each: body median and sigma factors,
    # tail share factor, tail median relative to the body's.
    median_factor: np.ndarray
    sigma_factor: np.ndarray
    tail_weight: np.ndarray
    tail_reach: np.ndarray
    # Spike events: broker, first second (from start), duration s, max latency s,
    # share of that second's calls caught.
    events: dict[str, np.ndarray] = field(default_factory=dict)


def plan_night(config: Double11Config) -> Night:
    rng = rng_for(config.seed, 1)
    b = config.brokers
    weight = rng.lognormal(0.0, 0.2, b)
    weight /= weight.mean()
    n_stall = max(1, round(0.03 * b))
    order = rng.permutation(b)
    stall = np.sort(order[:n_stall])
    degrading = int(order[n_stall % b])
    peak_offset = (config.peak_time - config.start).total_seconds()
    character = rng_for(config.seed, 5)  # its own stream: the traffic and events stay as they were
    return Night(
        config=config,
        peak_factor=float(rng.uniform(10.0, 20.0)),
        broker_weight=weight,
        msg_bytes=rng.uniform(600.0, 1800.0, b),
        stall_brokers=stall,
        degrading_broker=degrading,
        degrade_start_s=peak_offset + 3600.0,
        median_factor=character.lognormal(0.0, 0.15, b),
        sigma_factor=character.uniform(0.85, 1.2, b),
        tail_weight=np.clip(character.lognormal(0.0, 0.6, b), 0.25, 4.0),
        tail_reach=character.uniform(4.0, 6.5, b),
        events=_plan_events(config, stall, peak_offset, rng_for(config.seed, 2)),
    )


def _plan_events(config, stall_brokers, peak_offset, rng) -> dict[str, np.ndarray]:
    total = config.seconds
    parts = []
    # PageCache stalls: ~2 per hour per stalling broker, 4x as often in the peak hour.
    for broker in stall_brokers:
        n = rng.poisson(2.0 * total / 3600.0 + 6.0 * (0 <= peak_offset < total))
        starts = rng.uniform(0, total, n)
        extra = rng.poisson(6.0) if 0 <= peak_offset < total else 0
        starts = np.concatenate([starts, peak_offset + rng.uniform(0, 3600, extra)])
        k = len(starts)
        parts.append(
            (np.full(k, broker), starts, rng.uniform(1, 3, k),
             np.exp(rng.uniform(np.log(0.2), np.log(2.0), k)), rng.uniform(0.15, 0.4, k))
        )  # fmt: skip
    # GC pauses: every broker, about one noticeable pause per two hours, 25-90 ms.
    n = rng.poisson(config.brokers * total / 7200.0)
    parts.append(
        (rng.integers(0, config.brokers, n), rng.uniform(0, total, n), np.ones(n),
         rng.uniform(0.025, 0.09, n), rng.uniform(0.02, 0.08, n))
    )  # fmt: skip
    names = ("broker", "start", "duration", "max_s", "share")
    cols = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    ev = dict(zip(names, cols, strict=True))
    ev["broker"] = ev["broker"].astype(np.int64)
    ev["start"] = np.floor(ev["start"]).astype(np.int64)
    ev["duration"] = np.ceil(ev["duration"]).astype(np.int64)
    keep = ev["start"] < total
    return {k: v[keep] for k, v in ev.items()}


def send_rate(night: Night, seconds: np.ndarray) -> np.ndarray:
    """Expected sends/s, shape (T, B), for seconds counted from the start."""
    cfg = night.config
    from_peak = seconds - (cfg.peak_time - cfg.start).total_seconds()
    level = diurnal(from_peak) * flash_multiplier(from_peak, night.peak_factor)
    return cfg.base_rate * level[:, None] * night.broker_weight[None, :]


def body_median(night: Night, op: str, seconds: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Median latency (T, B) of `op`: queueing grows with load; one broker degrades."""
    shape = OP_SHAPES[op]
    m = shape.median_s * night.median_factor[None, :] * (1.0 + 3.0 * load**3)
    ramp = np.clip((seconds - night.degrade_start_s) / (6 * 3600.0), 0.0, 1.0)
    m[:, night.degrading_broker] *= 1.0 + 11.0 * ramp**2
    return m


def tail_share(load: np.ndarray) -> np.ndarray:
    """Share of calls in the slow tail (median 6x the body): fattens near saturation."""
    return 0.002 + 0.03 * np.clip(load, 0.0, 1.0) ** 4


def spike_grid(night: Night, first: int, n_seconds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (second, broker) of a chunk: worst spike latency (s) and share caught."""
    ev = night.events
    b = night.config.brokers
    max_s = np.zeros((n_seconds, b))
    share = np.zeros((n_seconds, b))
    hit = (ev["start"] < first + n_seconds) & (ev["start"] + ev["duration"] > first)
    for i in np.flatnonzero(hit):
        lo = max(ev["start"][i] - first, 0)
        hi = min(ev["start"][i] + ev["duration"][i] - first, n_seconds)
        br = ev["broker"][i]
        bigger = ev["max_s"][i] > max_s[lo:hi, br]
        max_s[lo:hi, br] = np.where(bigger, ev["max_s"][i], max_s[lo:hi, br])
        share[lo:hi, br] = np.maximum(share[lo:hi, br], ev["share"][i])
    return max_s, share
