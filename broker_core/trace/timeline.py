"""A message's timeline from its stored record and its trace records: sent (by whom,
to which broker, RT, attempts, why it retried, the fuse's view), stored (queue,
offset, answer code, durable now), delivered to each group (when, by which client,
end-to-end delay, committed), and what is missing, said in words: "stored, never
delivered to group billing: its offset on queue 2 is 1,203 behind".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from broker_core.trace.copies import DEAD, DELAYED, DUE, HALF, MADE_BY_BROKER, Copy, copy_of


@dataclass
class Delivery:
    group: str
    client: str
    pulled_ms: int
    committed_ms: int | None
    delay_ms: int  # pulled - born (end to end)
    broker: str = ""
    via: str = ""  # "gRPC": a RocketMQ client's pop, recorded by the broker


@dataclass
class Timeline:
    id: str
    topic: str
    keys: str
    tags: str
    broker: str  # where it is stored (the broker the id names)
    queue_id: int
    queue_offset: int
    born_ms: int
    store_ms: int
    durable: bool
    body_bytes: int
    send: dict | None = None  # the producer's record
    store: dict | None = None  # the broker's record
    deliveries: dict[str, list[Delivery]] = field(default_factory=dict)  # group -> in order
    groups: dict[str, int] = field(default_factory=dict)  # group -> offset on the queue
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    copy: Copy | None = None  # what it is a copy of (trace.copies), None: as sent
    client_id: str = ""  # the id its client gave it, when not ours (a RocketMQ client's)

    def to_dict(self) -> dict:
        return asdict(self)

    def delay_ms(self, group: str) -> int | None:
        got = self.deliveries.get(group)
        return got[0].delay_ms if got else None


def build_timeline(doc: dict, records: list[dict],
                   name_of: Callable[[str], str] = lambda a: a) -> Timeline:
    """``doc``: a broker's message document (lookup_ops.message_doc); ``records``:
    the trace records about its id."""
    # what the message itself holds, a send or `stored` record leaves out (records.FIELDS)
    held = {"topic": doc["topic"], "tags": doc.get("tags") or "", "addr": doc["store_host"],
            "bytes": doc.get("body_bytes", 0), "queue_id": doc["queue_id"],
            "queue_offset": doc["queue_offset"], "store_ms": doc["store_ms"]}
    sends = sorted(({**held, **r} for r in records if r.get("type") == "send"),
                   key=lambda r: r["born_ms"])
    stores = [r for r in records if r.get("type") == "store"] or [
        {**r, **held, "type": "store", "id": doc["id"]} for r in records
        if r.get("type") == "stored"]
    t = Timeline(
        id=doc["id"], topic=doc["topic"], keys=doc.get("keys") or "", tags=doc.get("tags") or "",
        broker=name_of(doc["store_host"]), queue_id=doc["queue_id"],
        queue_offset=doc["queue_offset"], born_ms=doc["born_ms"], store_ms=doc["store_ms"],
        durable=bool(doc.get("durable")), body_bytes=doc.get("body_bytes", 0),
        send=sends[0] if sends else None, store=stores[0] if stores else None,
        groups=dict(doc.get("groups") or {}), copy=copy_of(doc),
        client_id=(doc.get("properties") or {}).get("UNIQ_KEY", ""))
    c = t.copy
    sent = c is None or c.kind not in MADE_BY_BROKER  # else the broker made it: no send
    born = t.send["born_ms"] if t.send else t.born_ms
    for r in sorted((r for r in records if r.get("type") == "deliver"),
                    key=lambda r: r.get("pulled_ms", 0)):
        t.deliveries.setdefault(r["group"], []).append(Delivery(
            r["group"], r.get("client", ""), r["pulled_ms"], r.get("committed_ms"),
            r["pulled_ms"] - born, r.get("broker", ""), r.get("via", "")))
    traced = "TRACE" in (doc.get("properties") or {})
    sender = f"group {c.group}'s consumer" if c and c.sent_back else "the producer"
    if t.send is None and sent and not traced:  # nothing lost: a note, as for a consumer
        t.notes.append(f"no send record: {sender} does not trace this message")
    elif t.send is None and sent:
        t.missing.append(f"no send record yet: {sender}'s trace batch is not written (or "
                         "was lost: it warns when its trace batches are refused)")
    if t.store is None and traced and sent:
        t.missing.append("no store record yet: the broker writes them once a second")
    if not t.durable:
        t.notes.append("not yet flushed to disk on the broker asked")
    for group, got in t.deliveries.items():
        if len(got) > 1:
            t.notes.append(f"group {group}: delivered {len(got)} times "
                           f"({len(got) - 1} redelivery)")
        if all(d.committed_ms is None for d in got):
            offset = t.groups.get(group)
            if offset is None or offset <= t.queue_offset:
                t.missing.append(f"delivered to group {group}, not committed yet")
    for group, offset in sorted(t.groups.items()):
        if group in t.deliveries:
            continue
        if offset > t.queue_offset:
            t.notes.append(f"group {group} consumed it (its offset {offset:,} is past it) "
                           "without a delivery record: that consumer does not trace")
        else:
            behind = t.queue_offset - offset + 1
            t.missing.append(f"stored, never delivered to group {group}: its offset on "
                             f"queue {t.queue_id} is {behind:,} behind")
    read = c is None or c.kind not in (DELAYED, HALF, DEAD)  # else no consumer group does
    if traced and read and not t.groups and not t.deliveries:
        t.missing.append("no consumer group has read this queue yet")
    return t


def join_copies(timelines: list[Timeline], now_ms: int, slack_ms: int = 5_000) -> None:
    """Notes a message's copies give each other (trace.copies): where a copy was stored
    again, and a delayed copy overdue when nothing stored from it was found."""
    stored_from: dict[str, list[Timeline]] = {}
    for t in timelines:
        if t.copy and t.copy.made_from:
            stored_from.setdefault(t.copy.made_from, []).append(t)
    # what a group read: (group, times sent back before) -> the message it read
    read = {(t.copy.group if t.copy else g, t.copy.tries if t.copy else 0): t
            for t in timelines for g in t.deliveries
            if t.copy is None or (t.copy.kind == DUE and t.copy.group == g)}
    for t in timelines:
        c = t.copy
        if c is not None and c.sent_back and c.kind in (DELAYED, DEAD):
            source = read.get((c.group, c.tries - 1))
            if source is not None and (c.tries > 1 or source.id == c.origin):
                what = "a dead letter" if c.kind == DEAD else f"retry {c.tries}"
                source.notes.append(f"group {c.group} failed it and sent it back: {what} "
                                    f"as {t.id}")
    for t in timelines:
        c = t.copy
        for i, again in enumerate(stored_from.get(t.id, ())):
            late = (f", {again.store_ms - c.due_ms:,} ms after it was due"
                    if c and c.kind == DELAYED and c.due_ms else "")
            twice = (" (once more: at least once, the broker stored it again after a "
                     "restart before it saved how far it had come)") if i else ""
            t.notes.append(f"stored again in {again.topic} as {again.id}{late}{twice}")
        if t.id in stored_from:
            continue
        if c and c.kind == DELAYED and c.due_ms and now_ms > c.due_ms + slack_ms:
            t.missing.append(
                f"due {(now_ms - c.due_ms) / 1000:,.0f} s ago, and no copy of it in "
                f"{c.to_topic} was found: the broker's delay service is behind (`floodgate "
                "status` shows delayed messages overdue), or the copy is outside this search")
        elif c and c.kind == DELAYED and c.due_ms and now_ms < c.due_ms:
            t.notes.append(f"not due yet: in {(c.due_ms - now_ms) / 1000:,.1f} s")
        elif c and c.kind == HALF:  # its decision is in %TX_OP%, which has no keys
            t.notes.append("no committed copy found: pending, or rolled back (`floodgate tx "
                           "list` shows the pending)")
