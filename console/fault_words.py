"""A broker's injected fault in words ("stalls of 800 ms every 5 s, errors 25 %, clears
after 2 min (1 min 50 s left)"): what `floodgate fault` prints and the broker screen's
events show."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """A duration a person reads at a glance: 3 µs, 12.5 ms, 5 s, 2 min 5 s, 1 h 30 min."""
    s = float(seconds)
    if s <= 0:
        return "0 s"
    # a unit while its figure rounds below 1000 (0.9996 s read "1e+03 ms")
    if s * 1e6 < 999.5:
        return f"{s * 1e6:.3g} µs"
    if s * 1e3 < 999.5:
        return f"{s * 1e3:.3g} ms"
    if s < 59.95:
        return f"{s:.3g} s"
    minutes, sec = divmod(round(s), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def describe(state: dict) -> str:
    """The broker's fault state in words, e.g. 'stalls of 800 ms every 5 s, errors 25 %'."""
    parts = []
    if state.get("stall_ms"):
        kind = "random stalls up to" if state.get("stall_random") else "stalls of"
        parts.append(f"{kind} {duration(state['stall_ms'] / 1e3)} every "
                     f"{duration(state.get('stall_every_s') or 0)}")
    if state.get("latency_ms"):
        parts.append(f"latency +{duration(state['latency_ms'] / 1e3)}")
    if state.get("error_rate"):
        parts.append(f"errors {state['error_rate'] * 100:.3g} %")
    if state.get("pause_s"):
        parts.append(f"pause {duration(state['pause_s'])}")
    if state.get("duration_s"):
        left = state.get("remaining_s")
        parts.append(f"clears after {duration(state['duration_s'])}"
                     + (f" ({duration(left)} left)" if left is not None else ""))
    known = {"active", "stall_ms", "stall_every_s", "stall_random", "latency_ms", "error_rate",
             "pause_s", "duration_s", "remaining_s", "since_s"}
    for key, value in state.items():  # fields a newer broker may add
        if key not in known and value not in (0, 0.0, False, None):
            parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    since = state.get("since_s")
    # just injected, the broker's answer came microseconds in: "for 5.59 µs" said nothing
    head = ("fault active" if since is None or since < 1.0
            else f"fault active for {duration(since)}")
    return f"{head}: {', '.join(parts) or 'nothing'}"
