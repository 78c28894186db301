"""Short human figures for tables: 3.1 ms, 12.4k/s, 73 %, 1.2 MB. None -> "-"."""

from __future__ import annotations

from datetime import UTC, datetime

STATE_STYLE = {"UP": "green", "SLOW": "yellow", "FAILING": "red", "ISOLATED": "magenta",
               "DOWN": "bold red"}
# consumer groups (broker_core.observe.backlog): STOPPED is as bad as STALLED, told apart
# by its word (its consumers are gone rather than stuck)
GROUP_STYLE = {"OK": "green", "WARNING": "yellow", "STALLED": "bold red", "STOPPED": "bold red"}


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def rate(per_s: float | None, signed: bool = False) -> str:
    """Every rate the console shows, one way: 999/s, 1.0k/s .. 9.9k/s, 10k/s, 1,234k/s.

    The unit is chosen on the figure as rounded for display, so 999.6 reads 1.0k/s (not
    "1000/s" beside another screen's "1.0k/s") and 9,990 reads 10k/s. A rate is never
    negative: one below 0 is not known ("-"); `signed` is for a change per second (a
    lag's trend), written +1.2k/s or -40/s."""
    if per_s is None or per_s != per_s:  # None or NaN
        return "-"
    if per_s < 0 and not signed:
        return "-"
    sign = ("+" if per_s > 0 else "-" if per_s < 0 else "") if signed else ""
    v = abs(per_s)
    if round(v) < 1000:
        return f"{sign}{v:.0f}/s"
    if round(v / 1000, 1) < 10:
        return f"{sign}{v / 1000:.1f}k/s"
    return f"{sign}{v / 1000:,.0f}k/s"


def pct(ratio: float | None, digits: int = 0) -> str:
    return "-" if ratio is None else f"{ratio * 100:.{digits}f} %"


def size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def count(n: int | float | None) -> str:
    return "-" if n is None else f"{int(n):,}"


def duration(seconds: float | None, never: str = "-") -> str:
    """4.2 s, 3m20s, 2h05m; `never` for None (a drain time that is not coming)."""
    if seconds is None:
        return never
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m{int(seconds % 60):02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def clock(epoch: float | None) -> str:
    if not epoch:
        return "--:--:--"
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S")


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], width: int | None = None) -> str:
    """Unicode sparkline, scaled to the largest value; gaps for None."""
    if width is not None and len(values) > width:
        values = values[-width:]
    top = max((v for v in values if v is not None), default=0.0)
    if top <= 0:
        return "".join(" " if v is None else SPARK[0] for v in values)
    return "".join(" " if v is None else SPARK[min(7, int(v / top * 7.999))] for v in values)


class Sparkline:
    """A sparkline as wide as it is given room for, keeping the newest values."""

    def __init__(self, values: list[float | None], style: str = "") -> None:
        self.values, self.style = values, style

    def __rich_console__(self, console, options):
        from rich.text import Text

        yield Text(sparkline(self.values, options.max_width), style=self.style, no_wrap=True)
