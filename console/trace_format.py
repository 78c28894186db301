"""How a message's timeline reads, for `floodgate trace` and the console's trace screen."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from broker_core.trace.copies import MADE_BY_BROKER, describe
from console.errors import UsageError

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(text: str, flag: str, now: float | None = None) -> int:
    """'10m', '2h', '1d' (that long ago) or an ISO time (UTC unless it says) -> epoch ms."""
    now = time.time() if now is None else now
    s = text.strip()
    m = _SPAN.match(s)
    if m:
        return int((now - float(m.group(1)) * _UNIT_S[m.group(2)]) * 1000)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a span ago (90s, 10m, 2h, 1d) or an ISO "
                         "time (2026-11-11T00:00:00)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def clock(ms: int | None) -> str:
    """Wall time of day, ms precision, UTC: what an SRE lines up with the logs."""
    if not ms:
        return "?"
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%H:%M:%S.") + f"{ms % 1000:03d}"


def day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def timeline_lines(t) -> list[str]:
    """A Timeline as plain lines (no markup)."""
    out = [f"message {t.id}  topic {t.topic}  keys {t.keys or '-'}"
           f"{'  tags ' + t.tags if t.tags else ''}  {t.body_bytes:,} B  ({day(t.store_ms)} UTC)"
           + (f"  (its client's id {t.client_id})" if t.client_id else "")]
    if t.copy is not None:
        out.append(f"  ({describe(t.copy, clock)})")
    s = t.send
    if s:
        retry = f", retried: {'; '.join(s.get('retries') or [])}" if s.get("retries") else ""
        fuse = s.get("fuse") or {}
        fuse_txt = ""
        if isinstance(fuse, str):
            fuse_txt = f", fuse: {fuse}"
        elif fuse:
            ex = fuse.get("excluded") or []
            fuse_txt = f", fuse: {fuse.get('broker')}" + (f" (isolated: {', '.join(ex)})"
                                                          if ex else "")
        broker_ms = f", broker {s['broker_ms']:.2f} ms" if s.get("broker_ms") is not None else ""
        broker, addr = s.get("broker", "?"), s.get("addr") or "?"
        to = broker if addr in (broker, "?") else f"{broker} ({addr})"  # not the address twice
        verb = "sent back" if t.copy is not None and t.copy.sent_back else "sent"
        if s.get("via"):  # a RocketMQ client's: the broker saw one attempt, not its RT
            out.append(f"  {clock(s['born_ms'])}  {verb} by {s.get('client', '?')} (a "
                       f"RocketMQ client, {s['via']}) to {to}: {s.get('status')}, "
                       f"{s.get('broker_ms') or 0:.2f} ms on the broker")
        else:
            out.append(f"  {clock(s['born_ms'])}  {verb} by {s.get('client', '?')} to "
                       f"{to}: {s.get('status')}, "
                       f"RT {s.get('rt_ms', 0):.2f} ms{broker_ms}, {s.get('attempts', 1)} "
                       f"attempt(s){retry}{fuse_txt}")
    elif t.copy is not None and t.copy.kind in MADE_BY_BROKER:
        out.append(f"  {clock(t.born_ms)}  born (sent as {t.copy.made_from or 'an earlier copy'})")
    else:
        out.append(f"  {clock(t.born_ms)}  born (no send record)")
    st = t.store or {}
    code = f", answered {st['code']}" if st.get("code") else ""
    modes = f" (flush {st['flush']}, replication {st['replication']})" if st else ""
    out.append(f"  {clock(t.store_ms)}  stored on {t.broker}: queue {t.queue_id}, offset "
               f"{t.queue_offset:,}{code}{modes}, "
               f"{'durable' if t.durable else 'not yet flushed'} now "
               f"(+{t.store_ms - (s['born_ms'] if s else t.born_ms)} ms)")
    born = s["born_ms"] if s else t.born_ms
    deliveries = [(d.pulled_ms, group, i, d) for group in t.deliveries
                  for i, d in enumerate(t.deliveries[group])]
    for _pulled, group, i, d in sorted(deliveries, key=lambda x: (x[0], x[1])):  # in time
        commit = (f", {'acknowledged' if d.via else 'committed'} {clock(d.committed_ms)}"
                  if d.committed_ms else ", not committed when traced")
        again = " (redelivery)" if i else ""
        how = f"popped by group {group}{again} ({d.client}, {d.via})" if d.via else \
            f"delivered to group {group}{again} ({d.client})"
        out.append(f"  {clock(d.pulled_ms)}  {how}{commit}: end to end "
                   f"{d.pulled_ms - born:,} ms")
    for note in t.notes:
        out.append(f"  note: {note}")
    for gap in t.missing:
        out.append(f"  MISSING: {gap}")
    return out


def failed_send_lines(r: dict) -> list[str]:
    retries = "; ".join(r.get("retries") or [])
    if r.get("via"):  # a RocketMQ client's, recorded by the broker that refused it
        return [f"send of keys {r.get('keys')} to topic {r.get('topic')} by {r.get('client')} "
                f"(a RocketMQ client, {r['via']}) at {clock(r.get('born_ms'))} UTC: refused "
                f"by {r.get('broker')}, {r.get('error', '')} (its client may retry it)"]
    return [f"send of keys {r.get('keys')} to topic {r.get('topic')} by {r.get('client')} "
            f"at {clock(r.get('born_ms'))} UTC: never stored, FAILED after "
            f"{r.get('attempts', 1)} attempt(s): {r.get('error', '')}"
            + (f" (retried: {retries})" if retries else "")]
