"""Delayed messages: RocketMQ 4's 18 delay levels, the property that asks for one and
the properties the broker keeps the real destination in.

Why levels and not any delay: each level is one queue of the schedule topic, in
store order, so its messages fall due in the order they sit and the broker finds
what is due by looking at 18 queue heads (no second index to keep crash-safe). Any
delay would need RocketMQ 5's timer wheel, an index ordered by due time; not built.
"""

from __future__ import annotations

PROP_DELAY = "DELAY"  # the level, 1..18 (RocketMQ's property and numbering)
PROP_REAL_TOPIC = "REAL_TOPIC"  # where a delayed message goes when due ...
PROP_REAL_QID = "REAL_QID"  # ... and its queue there
SCHEDULE_TOPIC = "%SCHEDULE%"  # a system topic: queue level-1 holds level `level`

LEVELS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800,
            3600, 7200)


def label(level: int) -> str:
    """`1s`, `30s`, `2m`, `1h` ..."""
    s = LEVELS_S[level - 1]
    return f"{s // 3600}h" if s >= 3600 else f"{s // 60}m" if s >= 60 else f"{s}s"


LABELS = tuple(label(n) for n in range(1, len(LEVELS_S) + 1))


def level_of(delay: float | str) -> int:
    """The level of a delay given in seconds (5, 60.0) or as a label ("5s", "1m", "2h");
    ValueError naming the levels when it is none of them."""
    if isinstance(delay, str) and delay in LABELS:
        return LABELS.index(delay) + 1
    try:
        seconds = float(delay)
    except (TypeError, ValueError):
        seconds = None
    if seconds is not None and seconds.is_integer() and int(seconds) in LEVELS_S:
        return LEVELS_S.index(int(seconds)) + 1
    raise ValueError(f"a delay must be one of RocketMQ's levels: {' '.join(LABELS)} "
                     f"(not {delay!r})")


def parse_level(text: str) -> int:
    """The DELAY property's level; ValueError when it is not 1..18."""
    if text.isdigit() and 1 <= int(text) <= len(LEVELS_S):
        return int(text)
    raise ValueError(f"DELAY must be a level 1..{len(LEVELS_S)}, not {text!r}")


def with_delay(properties: dict[str, str] | None, delay: float | str | None
               ) -> dict[str, str] | None:
    """`properties` asking for `delay` (None: as they are)."""
    if delay is None:
        return properties
    return {**(properties or {}), PROP_DELAY: str(level_of(delay))}
