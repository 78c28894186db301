"""The typed figures a broker's snapshot holds and `/stats` sends: each declared
once, as a frozen dataclass of numbers whose encoding and lenient decoding come
from its fields.

Decoding never raises: what is missing or not a number takes None, an int
field takes an int (2.9 -> 2) and a float field a float, so a newer broker
never breaks an older console and a broken answer reads as "not sent".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar, Self


def num(value: Any, kind: type = float) -> Any:
    """``value`` as ``kind`` (int or float), or None when it is not a finite number."""
    if type(value) is kind:  # the usual case, first: a console decodes ~10k figures a second
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return kind(value)
    except (OverflowError, ValueError):  # int() of an infinity or NaN (JSON allows both)
        return None


EMPTY: Mapping[str, Any] = MappingProxyType({})


def as_map(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # what JSON gives: skips the slower ABC check
        return value
    return value if isinstance(value, Mapping) else EMPTY


class Figures:
    """Base of a frozen dataclass whose fields are all `int | None` or `float | None`."""

    _kinds: ClassVar[tuple[tuple[str, type], ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._kinds = ()  # filled on first use: @dataclass runs after this hook

    @classmethod
    def kinds(cls) -> tuple[tuple[str, type], ...]:
        if not cls._kinds:
            cls._kinds = tuple((f.name, int if str(f.type).startswith("int") else float)
                               for f in fields(cls))  # type: ignore[arg-type]
        return cls._kinds

    @classmethod
    def from_dict(cls, doc: Any) -> Self:
        # a console decodes ~2,000 of these a second (200 brokers x 3 ops x 3 windows):
        # the figures go straight into the instance dict (every field is set, as
        # __init__ would; a frozen __init__ costs 3x this)
        get = as_map(doc).get
        new = object.__new__(cls)
        new.__dict__.update({name: v if type(v := get(name)) is kind else num(v, kind)
                             for name, kind in cls.kinds()})
        return new

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name, _ in self.kinds()}


@dataclass(frozen=True)
class OpWindow(Figures):
    """One operation over a window of closed seconds (1 s, 10 s or 60 s)."""

    count: int | None = None
    rate: float | None = None
    msgs_per_s: float | None = None
    bytes_per_s: float | None = None
    errors: int | None = None  # answered with an error
    failures: int | None = None  # of those, the broker's own (protocol.BROKER_FAILURE_CODES)
    over_20ms: int | None = None
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Totals(Figures):
    """Counts since the broker started."""

    messages_in: int | None = None  # stored
    messages_out: int | None = None  # delivered by pulls
    bytes_in: int | None = None
    bytes_out: int | None = None
    send_over_20ms: int | None = None  # exact, not read off a bucket
    system_busy: int | None = None  # sends refused: the write path backed up
    flow_control: int | None = None  # sends refused: over a quota
    send_errors: int | None = None
    bad_requests: int | None = None
    connections: int | None = None
    connections_closed_bad: int | None = None  # closed for a malformed frame


@dataclass(frozen=True)
class DiskFigures(Figures):
    """The data disk and the store's share of it."""

    used_bytes: int | None = None
    total_bytes: int | None = None
    used_ratio: float | None = None
    store_bytes: int | None = None  # CommitLog segments on disk
    max_used_ratio: float | None = None  # above: the oldest segments go, however young
    full_ratio: float | None = None  # above: sends are refused DISK_FULL


@dataclass(frozen=True)
class CommitLogFigures(Figures):
    min_offset: int | None = None
    max_offset: int | None = None  # the write offset
    flushed_offset: int | None = None
    segments: int | None = None
    segment_bytes: int | None = None


@dataclass(frozen=True)
class LoopLagFigures(Figures):
    """How late the broker's event loop ran (requests waited that long to be read)."""

    max_10s: float | None = None
    max_60s: float | None = None
    late_total: int | None = None  # beats later than two intervals
