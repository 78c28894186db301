"""`/stats` as a typed contract: `BrokerStats` and `ProducerStats`.

The broker's `/stats` exporter builds a `BrokerStats` from its snapshot and
sends `to_dict()`; the console decodes each document once with `from_dict`.
Decoding is lenient: unknown fields are ignored and missing or malformed ones
take their defaults (None for a figure nobody sent), so a newer broker never
breaks an older console and a broken answer never raises.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from broker_core.observe.broker_figures import BrokerFigures
from broker_core.observe.figures import (
    CommitLogFigures,
    DiskFigures,
    LoopLagFigures,
    OpWindow,
    Totals,
    as_map,
    num,
)
from broker_core.observe.snapshot import BrokerSnapshot
from heatmap import LatencyHistogram

HistorySecond = tuple[int, LatencyHistogram]  # (epoch second, that second's histogram)


_num, _map = num, as_map


def _figures(value: Any, kind: type) -> dict[str, Any]:
    """A mapping of names to numbers; what is not a number is left out."""
    return {str(k): n for k, v in _map(value).items() if (n := _num(v, kind)) is not None}


def _history(doc: Any, ops: Collection[str] | None) -> dict[str, tuple[HistorySecond, ...]]:
    out = {}
    for op, seconds in _map(doc).items():
        if not isinstance(seconds, list) or ops is not None and op not in ops:
            continue
        kept = []
        for second in seconds:
            ts = _num(_map(second).get("ts"), int)
            if ts is None:
                continue
            try:
                kept.append((ts, LatencyHistogram.from_dict(second)))
            except (ValueError, TypeError, OverflowError):  # malformed: dropped, not fatal
                continue
        out[str(op)] = tuple(kept)
    return out


@dataclass(frozen=True)
class SlaveLag:
    name: str
    lag_bytes: int | None = None
    lag_s: float | None = None
    in_sync: bool = False


@dataclass(frozen=True)
class HaFigures:
    """A replicated group's broker (`ha` in /stats): role, epoch, and as master its
    in-sync slaves and their lag; as slave how far behind its master it is."""

    group: str = ""
    role: str = ""  # MASTER | SLAVE | NONE
    epoch: int | None = None
    master: str = ""
    replication: str = ""
    in_sync: tuple[str, ...] = ()  # a master's in-sync slaves
    slaves: tuple[SlaveLag, ...] = ()
    lag_bytes: int | None = None  # a slave's, as it sees its master's end
    events: tuple[Mapping[str, Any], ...] = ()  # role changes and truncations, oldest first
    doc: Mapping[str, Any] = field(default_factory=dict)  # everything, as sent

    @property
    def worst_lag_s(self) -> float | None:
        return max((s.lag_s for s in self.slaves if s.lag_s is not None), default=None)

    @property
    def worst_lag_bytes(self) -> int | None:
        if self.role == "SLAVE":
            return self.lag_bytes
        return max((s.lag_bytes for s in self.slaves if s.lag_bytes is not None), default=None)

    @classmethod
    def from_dict(cls, doc: Any) -> HaFigures | None:
        doc = _map(doc)
        if not doc.get("group"):
            return None
        slaves = tuple(SlaveLag(str(_map(x).get("name") or ""),
                                _num(_map(x).get("lag_bytes"), int), _num(_map(x).get("lag_s")),
                                _map(x).get("in_sync") is True)
                       for x in doc.get("slaves") or () if isinstance(x, Mapping))
        following = _map(doc.get("following"))
        in_sync = doc.get("in_sync")
        events = doc.get("events")
        return cls(str(doc.get("group")), str(doc.get("role") or ""), _num(doc.get("epoch"), int),
                   str(doc.get("master") or ""), str(doc.get("replication") or ""),
                   tuple(str(n) for n in in_sync) if isinstance(in_sync, list) else (),
                   slaves, _num(following.get("lag_bytes"), int),
                   tuple(e for e in events if isinstance(e, Mapping))
                   if isinstance(events, list) else (), dict(doc))


@dataclass(frozen=True)
class ConsumerGroup:
    """One consumer group as a broker judges it (observe.backlog): OK, WARNING,
    STALLED or STOPPED, its lag and rates, and per queue the same."""

    status: str = "OK"
    lag: int = 0
    trend_per_s: float = 0.0
    consume_per_s: float = 0.0
    produce_per_s: float = 0.0
    drain_s: float | None = None
    idle_s: float | None = None
    topics: tuple[str, ...] = ()
    queues: tuple[Mapping[str, Any], ...] = ()  # {topic, queue, committed, end, lag, status}
    queue_count: int = 0  # every queue it has offsets on (`queues` lists those behind)
    instance_of: str | None = None  # an instance of this broadcast group (its own offsets)
    exactly_once: bool = False  # its offsets move with transactions (client.transform)

    @classmethod
    def from_dict(cls, doc: Any) -> ConsumerGroup:
        get = _map(doc).get
        status = get("status")
        queues = get("queues")
        topics = get("topics")
        return cls(status if status in ("OK", "WARNING", "STALLED", "STOPPED") else "OK",
                   _num(get("lag"), int) or 0, _num(get("trend_per_s")) or 0.0,
                   _num(get("consume_per_s")) or 0.0, _num(get("produce_per_s")) or 0.0,
                   _num(get("drain_s")), _num(get("idle_s")),
                   tuple(str(t) for t in topics) if isinstance(topics, list) else (),
                   tuple(q for q in queues if isinstance(q, Mapping))
                   if isinstance(queues, list) else (), _num(get("queue_count"), int) or 0,
                   str(of) if isinstance(of := get("instance_of"), str) else None,
                   get("exactly_once") is True)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}


@dataclass(frozen=True)
class FlowFigures:
    """A broker's flow control (server.flow_control): quotas in force and the sends
    refused, per topic and producer group."""

    quotas: tuple[Mapping[str, Any], ...] = ()  # {kind, target, rate, burst, warmup_s, buckets}
    throttled: tuple[Mapping[str, Any], ...] = ()  # {topic, group, count}
    throttled_total: int = 0

    @classmethod
    def from_dict(cls, doc: Any) -> FlowFigures:
        get = _map(doc).get

        def rows(value: Any) -> tuple[Mapping[str, Any], ...]:
            return tuple(r for r in value if isinstance(r, Mapping)) \
                if isinstance(value, list) else ()

        return cls(rows(get("quotas")), rows(get("throttled")),
                   _num(get("throttled_total"), int) or 0)

    def to_dict(self) -> dict[str, Any]:
        return {"quotas": [dict(q) for q in self.quotas],
                "throttled": [dict(t) for t in self.throttled],
                "throttled_total": self.throttled_total}


def _ops(doc: Any) -> dict[str, dict[str, OpWindow]]:
    return {str(op): {str(w): OpWindow.from_dict(figs) for w, figs in _map(ws).items()}
            for op, ws in _map(doc).items()}


@dataclass(frozen=True, kw_only=True)
class BrokerStats(BrokerFigures):
    """The /stats document, field by field: each key of the JSON is the field's name,
    encoded and decoded by the codec `_CODECS` names for it (plain strings and
    numbers by their type). The figures a snapshot holds alike are declared once, in
    observe.broker_figures; these are the document's own."""

    broker: str = ""
    ops: Mapping[str, Mapping[str, OpWindow]] = field(default_factory=dict)
    history: Mapping[str, tuple[HistorySecond, ...]] = field(default_factory=dict)
    flush_lag_bytes: int | None = None
    ha: HaFigures | None = None  # a replicated group's broker
    consumers: Mapping[str, ConsumerGroup] = field(default_factory=dict)  # group -> verdict
    flow: FlowFigures = field(default_factory=FlowFigures)

    def window(self, op: str, window: str = "10s") -> OpWindow:
        return self.ops.get(op, {}).get(window) or OpWindow()

    @classmethod
    def from_snapshot(cls, snap: BrokerSnapshot, history_s: int = 0) -> BrokerStats:
        seconds = snap.last_seconds(history_s)
        same = {name: getattr(snap, name) for name in _FROM_SNAPSHOT}
        return cls(
            broker=snap.name, ops=snap.windows,
            history={op: tuple((s.ts, s.ops[op].hist) for s in seconds) for op in snap.windows}
            if history_s else {},
            ha=HaFigures.from_dict(snap.ha),
            consumers={g: ConsumerGroup.from_dict(d) for g, d in snap.consumers.items()},
            flow=FlowFigures.from_dict(snap.flow), **same)

    def to_dict(self) -> dict[str, Any]:
        """The /stats document (JSON-ready)."""
        out = {}
        for name, (_, encode) in _CODECS.items():
            value = getattr(self, name)
            if value is not None or name != "ha":  # a single-copy broker sends no "ha"
                out[name] = encode(value)
        return out

    @classmethod
    def from_dict(cls, doc: Any, history_ops: Collection[str] | None = None) -> BrokerStats:
        """Lenient: never raises; what is missing or malformed takes its default.

        `history_ops` keeps only those operations' per-second histograms (the
        console draws sends only: decoding the others would be most of its cost).
        """
        get = _map(doc).get
        values = {name: decode(get(name)) for name, (decode, _) in _CODECS.items()
                  if name != "history"}
        return cls(history=_history(get("history"), history_ops), **values)


def _plain(f) -> tuple:
    """The codec of a str or number field: its default when missing or malformed."""
    if f.type == "str":
        return (lambda v, d=f.default: str(v) if v else d), (lambda v: v)
    kind = int if f.type.startswith("int") else float
    return (lambda v: _num(v, kind)), (lambda v: v)


def _each(kind) -> tuple:
    return (lambda v: kind.from_dict(v)), (lambda v: v.to_dict())


_CODECS = {f.name: _plain(f) for f in fields(BrokerStats)
           if f.type == "str" or f.type in ("int | None", "float | None")}
_CODECS.update({
    "ops": (_ops, lambda ops: {op: {w: win.to_dict() for w, win in ws.items()}
                               for op, ws in ops.items()}),
    "history": (None, lambda h: {op: [{"ts": ts, **hist.to_dict()} for ts, hist in seconds]
                                 for op, seconds in h.items()}),
    "totals": _each(Totals), "commitlog": _each(CommitLogFigures), "disk": _each(DiskFigures),
    "loop_lag": _each(LoopLagFigures), "flow": _each(FlowFigures),
    "consumer_lag": (lambda v: _figures(v, int), dict),
    "topics": (lambda v: _figures(v, int), dict),
    "faults": (lambda v: dict(_map(v)), dict),
    "delayed": (lambda v: dict(_map(v)), dict),
    "transactions": (lambda v: dict(_map(v)), dict),
    "locks": (lambda v: dict(_map(v)), dict),
    "pulls": (lambda v: dict(_map(v)), dict),
    "idempotence": (lambda v: dict(_map(v)), dict),
    "access": (lambda v: dict(_map(v)), dict),
    "send_error_codes": (lambda v: _figures(v, int), dict),
    "last_send_failure": (lambda v: dict(_map(v)), dict),
    "last_send_refusal": (lambda v: dict(_map(v)), dict),
    "dead_letters": (lambda v: {str(g): _figures(d, float) for g, d in _map(v).items()},
                     lambda d: {g: dict(x) for g, x in d.items()}),
    "retries": (lambda v: {str(g): _figures(d, float) for g, d in _map(v).items()},
                lambda d: {g: dict(x) for g, x in d.items()}),
    "ha": (HaFigures.from_dict, lambda ha: dict(ha.doc)),
    "hottest_queues": (lambda v: tuple(dict(q) for q in v if isinstance(q, Mapping))
                   if isinstance(v, list) else (), lambda qs: [dict(q) for q in qs]),
    "consumers": (lambda v: {str(g): ConsumerGroup.from_dict(d) for g, d in _map(v).items()},
                  lambda cs: {g: c.to_dict() for g, c in cs.items()}),
})
assert set(_CODECS) == {f.name for f in fields(BrokerStats)}, "a /stats field without a codec"
_CODECS = {f.name: _CODECS[f.name] for f in fields(BrokerStats)}  # the document in field order
# what a snapshot holds under the same name and type
_FROM_SNAPSHOT = (*(f.name for f in fields(BrokerFigures)), "flush_lag_bytes")


@dataclass(frozen=True)
class ProducerStats:
    """A producer's /stats: its fuse snapshot (`fuse.FuseSnapshot.to_dict()` plus
    wall-clock times), its throttling figures (`sends`: FLOW_CONTROL answers,
    give-ups, seconds backed off) and, for a load generator, its recent sends."""

    producer: str = ""
    time: float | None = None
    fuse: Mapping[str, Any] | None = None
    load: Mapping[str, Any] | None = None
    sends: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, doc: Any) -> ProducerStats:
        doc = _map(doc)
        fuse, load = doc.get("fuse"), doc.get("load")
        return cls(producer=str(doc.get("producer") or ""), time=_num(doc.get("time")),
                   fuse=fuse if isinstance(fuse, Mapping) else None,
                   load=load if isinstance(load, Mapping) else None,
                   sends=_figures(doc.get("sends"), float))

    def to_dict(self) -> dict[str, Any]:
        return {"producer": self.producer, "time": self.time, "fuse": self.fuse,
                **({"load": self.load} if self.load is not None else {}),
                **({"sends": dict(self.sends)} if self.sends else {})}


def stats_document(snap: BrokerSnapshot, history_s: int = 0) -> dict[str, Any]:
    """The /stats exporter: the snapshot with its last `history_s` seconds."""
    return BrokerStats.from_snapshot(snap, history_s).to_dict()
