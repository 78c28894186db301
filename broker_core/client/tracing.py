"""What the producers and the consumer add to a trace (broker_core.trace).

`SendTracer`: a sampled send carries PROP_TRACE, and its outcome becomes a
``send`` record. `DeliveryTracer`: a traced message a consumer polls becomes a
``deliver`` record, held until the commit that covers it (stamped with the
commit time) or for `hold_s` at most, then handed to the dispatcher.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import (
    PROP_TRACE,
    TRACE_KEY_CHARS,
    Sampler,
    json_str,
    now_ms,
)

TRACE_ONLY = {PROP_TRACE: "1"}  # never mutated (protocol.encode_props caches its JSON)


def traced_properties(properties: dict | None) -> dict:
    return {**properties, PROP_TRACE: "1"} if properties else TRACE_ONLY


def traces(tracer: SendTracer, properties: dict | None) -> bool:
    """Whether a send is traced: sampled, or a copy of a traced message (a consumer's
    send-back, a resend), whose timeline would otherwise miss its send for good."""
    return tracer.sampler.sample() or (properties is not None and PROP_TRACE in properties)


class SendTracer:
    def __init__(self, dispatcher: TraceDispatcher, rate: float, client_id: str,
                 fuse=None) -> None:
        self.dispatcher, self.sampler = dispatcher, Sampler(rate)
        self.client_id, self.fuse = client_id, fuse
        self._client = json_str(client_id)
        self._names: dict[str, str] = {}  # broker name -> its JSON text
        # the fuse's view as JSON text for the excluded set it was made for (the fuse
        # replaces the set when it changes): a broker isolated all night made every
        # traced send sort and dump it again
        self._views: tuple[frozenset, dict[bool, str]] = (frozenset(), {})

    def _fuse_view(self, broker: str) -> str:
        """The fuse's view of the send, as JSON text."""
        if self.fuse is None:
            return "null"
        excluded = self.fuse.excluded
        if not excluded:
            return '"usable"'
        made_for, views = self._views
        if made_for is not excluded:
            views = {}
            self._views = (excluded, views)
        overflow = broker in excluded
        view = views.get(overflow)
        if view is None:  # a broker the fuse excludes was chosen only as overflow
            view = views[overflow] = json.dumps({"broker": "overflow" if overflow else "usable",
                                                 "excluded": sorted(excluded)})
        return view

    def record(self, topic: str, tags, keys, nbytes: int, born_ms: int, rt_s: float,
               result=None, exc: BaseException | None = None) -> None:
        """A `send` record: records.FIELDS["send"] for a stored message (the hot path;
        the message holds the rest), a dict of everything for a failed one."""
        if keys is not None and not isinstance(keys, str):
            keys = " ".join(keys)
        if result is not None and result.msg_id:
            b, msg_id = result.broker, result.msg_id
            name = self._names.get(b)
            if name is None:
                name = self._names[b] = json_str(b)
            broker_s = result.broker_s
            # records.FIELDS["send"], formatted here: see records.py on why not json.dumps
            self.dispatcher.add((msg_id[:TRACE_KEY_CHARS], (
                f'["send","{msg_id}",{json_str(keys)},{self._client},{born_ms},'
                f'{rt_s * 1000:.3f},"{result.status}",{name},{result.attempts},'
                f'{json.dumps(result.retries) if result.retries else "[]"},'
                f'{"null" if broker_s is None else f"{broker_s * 1000:.3f}"},'
                f'{self._fuse_view(b) if self.fuse is not None else "null"}]')))
        else:  # failed (or stored by a broker that does not say its id): by the keys
            retries = list(result.retries if result else getattr(exc, "retries", ()))
            self.dispatcher.add({
                "type": "send", "id": None, "topic": topic, "tags": tags, "keys": keys,
                "client": self.client_id, "born_ms": born_ms, "rt_ms": round(rt_s * 1000, 3),
                "bytes": nbytes, "status": result.status if result else "FAILED",
                "broker": result.broker if result else None,
                "attempts": result.attempts if result else len(retries) + 1,
                "retries": retries, "error": None if result else str(exc)})


class DeliveryTracer:
    """Held deliveries are (when polled, queue offset, message id, pulled ms) per queue;
    a released one becomes a hot record (records.FIELDS["deliver"]), formatted here:
    two groups tracing every message they read were a sixth of the demo's clients'
    CPU as dicts through json.dumps."""

    def __init__(self, dispatcher: TraceDispatcher, rate: float, group: str,
                 client_id: str, hold_s: float = 2.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """A delivery not committed within `hold_s` (on `monotonic`) goes out as such."""
        self.dispatcher, self.sampler = dispatcher, Sampler(rate)
        self._monotonic = monotonic
        self.group, self.client_id, self.hold_s = group, client_id, hold_s
        self._who = f"{json_str(group)},{json_str(client_id)},"
        self._names: dict[str, str] = {}  # broker name -> its JSON text
        self._held: dict[tuple[str, int], list[tuple[float, int, str, int]]] = {}

    def polled(self, broker: str, msgs) -> None:
        pulled = now_ms()
        at = self._monotonic()
        held = None
        for m in msgs:
            if PROP_TRACE not in m.properties or not self.sampler.sample():
                continue
            if held is None:
                held = self._held.setdefault((broker, m.queue_id), [])
            held.append((at, m.queue_offset, m.msg_id, pulled))
        self._release_old(at)

    def _add(self, broker: str, held: tuple[float, int, str, int],
             committed_ms: int | None) -> None:
        name = self._names.get(broker)
        if name is None:
            name = self._names[broker] = json_str(broker)
        _at, _offset, msg_id, pulled = held
        committed = "null" if committed_ms is None else committed_ms
        self.dispatcher.add((msg_id[:TRACE_KEY_CHARS],
                             f'["deliver","{msg_id}",{self._who}{name},{pulled},'
                             f'{committed}]'))

    def committed(self, queue: tuple[str, int], offset: int) -> None:
        """The group's offset on ``queue`` is now ``offset``: what it covers goes out."""
        held = self._held.get(queue)
        if not held:
            return
        stamp, keep = now_ms(), []
        for h in held:
            if h[1] < offset:
                self._add(queue[0], h, stamp)
            else:
                keep.append(h)
        self._held[queue] = keep

    def _release_old(self, now: float) -> None:
        for queue, held in self._held.items():
            if held and now - held[0][0] > self.hold_s:
                keep = []
                for h in held:
                    if now - h[0] > self.hold_s:
                        self._add(queue[0], h, None)
                    else:
                        keep.append(h)
                self._held[queue] = keep

    def release_all(self) -> None:
        for (broker, _qid), held in self._held.items():
            for h in held:
                self._add(broker, h, None)
        self._held.clear()
