"""What the producers and the consumer add to a trace (broker_core.trace).

`SendTracer`: a sampled send carries PROP_TRACE, and its outcome becomes a
``send`` record. `DeliveryTracer`: a traced message a consumer polls becomes a
``deliver`` record, held until the commit that covers it (stamped with the
commit time) or for `hold_s` at most, then handed to the dispatcher.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from broker_core.trace.dispatcher import TraceDispatcher
from broker_core.trace.records import PROP_MSG_ID, PROP_TRACE, Sampler, now_ms

TRACE_ONLY = {PROP_TRACE: "1"}  # never mutated (protocol.encode_props caches its JSON)


def traced_properties(properties: dict | None) -> dict:
    return {**properties, PROP_TRACE: "1"} if properties else TRACE_ONLY


class SendTracer:
    def __init__(self, dispatcher: TraceDispatcher, rate: float, client_id: str,
                 addrs: Mapping[str, str], fuse=None) -> None:
        self.dispatcher, self.sampler = dispatcher, Sampler(rate)
        self.client_id, self.addrs, self.fuse = client_id, addrs, fuse

    def _fuse_view(self, broker: str):
        if self.fuse is None:
            return None
        excluded = self.fuse.excluded
        if not excluded:
            return "usable"
        # a broker the fuse excludes was chosen only as overflow (every candidate excluded)
        return {"broker": "overflow" if broker in excluded else "usable",
                "excluded": sorted(excluded)}

    def record(self, topic: str, tags, keys, nbytes: int, born_ms: int, rt_s: float,
               result=None, exc: BaseException | None = None) -> None:
        """A `send` record, as a records.FIELDS["send"] tuple (the hot path)."""
        if keys is not None and not isinstance(keys, str):
            keys = " ".join(keys)
        if result is not None:
            b = result.broker
            self.dispatcher.add((
                "send", result.msg_id, topic, tags, keys, self.client_id, born_ms,
                round(rt_s * 1000, 3), nbytes, result.status, b, self.addrs.get(b, ""),
                result.attempts, result.retries, result.queue_id, result.queue_offset,
                result.store_ms,
                None if result.broker_s is None else round(result.broker_s * 1000, 3),
                self._fuse_view(b), None))
        else:
            retries = tuple(getattr(exc, "retries", ()))
            self.dispatcher.add((
                "send", None, topic, tags, keys, self.client_id, born_ms,
                round(rt_s * 1000, 3), nbytes, "FAILED", None, None, len(retries) + 1,
                retries, None, None, None, None, None, str(exc)))


class DeliveryTracer:
    def __init__(self, dispatcher: TraceDispatcher, rate: float, group: str,
                 client_id: str, hold_s: float = 2.0) -> None:
        self.dispatcher, self.sampler = dispatcher, Sampler(rate)
        self.group, self.client_id, self.hold_s = group, client_id, hold_s
        self._held: dict[tuple[str, int], list[tuple[float, dict]]] = {}

    def polled(self, broker: str, msgs) -> None:
        pulled = now_ms()
        at = time.monotonic()
        for m in msgs:
            props = m.properties
            if PROP_TRACE not in props or not self.sampler.sample():
                continue
            rec = {"type": "deliver", "id": props.get(PROP_MSG_ID), "group": self.group,
                   "client": self.client_id, "broker": broker, "topic": m.topic,
                   "queue_id": m.queue_id, "queue_offset": m.queue_offset,
                   "store_ms": m.store_timestamp, "pulled_ms": pulled, "committed_ms": None}
            self._held.setdefault((broker, m.queue_id), []).append((at, rec))
        self._release_old(at)

    def committed(self, queue: tuple[str, int], offset: int) -> None:
        """The group's offset on ``queue`` is now ``offset``: what it covers goes out."""
        held = self._held.get(queue)
        if not held:
            return
        stamp, keep = now_ms(), []
        for at, rec in held:
            if rec["queue_offset"] < offset:
                rec["committed_ms"] = stamp
                self.dispatcher.add(rec)
            else:
                keep.append((at, rec))
        self._held[queue] = keep

    def _release_old(self, now: float) -> None:
        for queue, held in self._held.items():
            if held and now - held[0][0] > self.hold_s:
                keep = []
                for at, rec in held:
                    if now - at > self.hold_s:
                        self.dispatcher.add(rec)
                    else:
                        keep.append((at, rec))
                self._held[queue] = keep

    def release_all(self) -> None:
        for held in self._held.values():
            for _at, rec in held:
                self.dispatcher.add(rec)
        self._held.clear()
