"""What the fuse is doing, in one line (the cluster screen, the fuse screen,
`floodgate status`): who is isolated since when and why, how much of the
cap is in use, and who serves again as overflow by rule 4.

Built only from the producers' fuse snapshots through `FuseCounts`, so the
words and the header's count agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from console.data.fuse_counts import FuseCounts
from console.data.state import ProducerView
from console.tui.format import clock

WHY = {"slow": "slowness", "error": "errors"}  # isolated for …
BEING = {"slow": "slow", "error": "erroring"}  # … serving as overflow


def cause_of(e) -> tuple[str | None, str | None]:
    """An isolated broker's (cause, latest offence when it differs): what isolated it
    and what it does now. The line and the fuse table both say it in their words and
    must not contradict the transitions table, which shows the cause."""
    latest = e.get("reason")
    cause = e.get("cause") or latest  # a producer before `cause` sent the latest only
    return cause, latest if latest and latest != cause else None


def _why(e) -> str:
    """`errors`, or `errors (now slow)`."""
    cause, now = cause_of(e)
    if not cause:
        return ""
    return WHY.get(cause, cause) + (f" (now {BEING.get(now, now)})" if now else "")


def _isolated(c: FuseCounts, broker: str) -> str:
    e = c.entry(broker)
    text = f"{broker} isolated"
    if e.get("since_wall"):
        text += f" {clock(e['since_wall'])}"
    if reason := _why(e):
        text += f" for {reason}"
    left = e.get("left_s")
    return text + (f", {left:.0f} s left" if isinstance(left, int | float) else "")


def _cap(c: FuseCounts) -> str:
    if c.cap is None:
        return ""
    if c.cap == 0 and c.brokers is not None:  # the Double-11 talk's 30 %: too few to take one out
        return (f"{c.brokers} brokers: the 30 % cap allows none out (overflow only; "
                "4 or more let the fuse isolate one)")
    of = f"cap {c.cap} of {c.brokers} brokers" if c.brokers is not None else f"cap {c.cap}"
    used = len(c.excluded)
    return f"{of} free" if not used else f"{of} full" if c.at_cap else f"{of}, {used} in use"


def describe_fuse(c: FuseCounts) -> str:
    """One producer's fuse as a sentence, e.g. `broker-2 isolated 00:41:07 for
    slowness, 42 s left; cap 1 of 6 brokers full; broker-4 erroring, serving
    as overflow (rule 4)`."""
    if c.dry_run:
        would = ", ".join(_isolated(c, b) for b in c.would_exclude) or "nothing"
        return f"dry run, excludes nobody; would exclude {would}"
    parts = [", ".join(_isolated(c, b) for b in c.excluded) or "nothing isolated"]
    if cap := _cap(c):
        parts.append(cap)
    if c.overflow:
        parts.append(f"{_overflow(c)}, serving as overflow")
    return "; ".join(parts)


def _overflow(c: FuseCounts) -> str:
    """`broker-2, broker-1 slow, broker-4 erroring`: earliest isolated first, by reason."""
    order = [i["broker"] for i in c.isolated]
    brokers = sorted(c.overflow, key=lambda b: order.index(b) if b in order else len(order))
    groups: dict[str, list[str]] = {}
    for b in brokers:
        groups.setdefault(BEING.get(c.entry(b).get("reason"), "isolated"), []).append(b)
    return ", ".join(f"{', '.join(names)} {being}" for being, names in groups.items())


def _shape(c: FuseCounts) -> tuple:
    return c.excluded, c.overflow, c.would_exclude, c.cap, c.dry_run


def fuse_sentence(producers: Sequence[ProducerView]) -> str:
    if not producers:
        return "fuse: no producer to ask (--producers HTTP_ADDR)"
    up = [p for p in producers if p.up and p.fuse is not None]
    parts = [f"fuse of {p.name}: producer not answering ({p.error})" for p in producers
             if not p.up]
    parts += [f"fuse of {p.name}: off" for p in producers if p.up and p.fuse is None]
    if len(up) == 1 and not parts:
        return f"fuse: {describe_fuse(up[0].counts)}"
    if len(up) > 1 and len({_shape(p.counts) for p in up}) == 1:
        parts.insert(0, f"fuse ({len(up)} producers agree): {describe_fuse(up[0].counts)}")
    else:
        parts[:0] = [f"fuse of {p.name}: {describe_fuse(p.counts)}" for p in up]
    return " │ ".join(parts)


def render(state, focus=None) -> Text:
    counts = [p.counts for p in state.producers if p.up and p.fuse is not None]
    style = "magenta" if any(c.at_cap for c in counts) else \
        "yellow" if any(c.excluded or c.overflow for c in counts) else ""
    return Text(fuse_sentence(state.producers), style=style)
