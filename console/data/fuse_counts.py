"""A producer's fuse snapshot (a mapping inside its /stats), read defensively: what it
isolated, excluded and serves as overflow against its cap (`FuseCounts`), and the
evidence of a broker's latest isolation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FuseCounts:
    """The one meaning of "isolated" shared by the header, the fuse screen and
    the cap alert: `excluded` brokers are isolated and not serving (what the
    cap bounds); `overflow` ones are isolated too but serve again because the
    cap was exceeded (rule 4: the earliest isolated go back first)."""

    excluded: tuple[str, ...] = ()
    overflow: tuple[str, ...] = ()
    isolated: tuple[Mapping[str, Any], ...] = ()  # the fuse's entries, earliest first
    cap: int | None = None
    brokers: int | None = None  # how many brokers the fuse chooses among
    would_exclude: tuple[str, ...] = ()  # a dry run's `excluded` (which stays empty)
    dry_run: bool = False

    @property
    def at_cap(self) -> bool:
        return self.cap is not None and self.cap > 0 and len(self.excluded) >= self.cap

    def entry(self, broker: str) -> Mapping[str, Any]:
        return next((i for i in self.isolated if i.get("broker") == broker), {})


def _get(doc: Any, key: str) -> Any:
    return doc.get(key) if isinstance(doc, Mapping) else None


def _int(doc: Any, key: str) -> int | None:
    value = _get(doc, key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):  # an infinity or NaN
        return None


def _list(doc: Any, key: str) -> list:
    value = _get(doc, key)
    return value if isinstance(value, list) else []


def fuse_counts(fuse: Any) -> FuseCounts:
    """FuseCounts from a producer's /stats `fuse` dict: unknown keys ignored,
    missing or malformed ones read as empty (lists are derived from the entries)."""
    entries = tuple(i for i in _list(fuse, "isolated")
                    if isinstance(i, Mapping) and isinstance(i.get("broker"), str))
    dry_run = _get(fuse, "dry_run") is True
    held = [i["broker"] for i in entries if not i.get("overflow")]  # isolated, not serving

    def names(key: str, derived: list[str]) -> tuple[str, ...]:
        value = _get(fuse, key)
        return tuple(str(b) for b in value) if isinstance(value, list) else tuple(derived)

    brokers = _get(fuse, "brokers")
    return FuseCounts(
        excluded=names("excluded", [] if dry_run else held),
        overflow=names("overflow", [i["broker"] for i in entries if i.get("overflow")]),
        isolated=entries, cap=_int(fuse, "cap"),
        brokers=len(brokers) if isinstance(brokers, list) else None,
        would_exclude=names("would_exclude", held if dry_run else []), dry_run=dry_run)


def isolated_by(fuse: Any, broker: str) -> str:
    """The detail of the fuse's latest isolation of `broker` among its recent transitions."""
    for t in reversed(_list(fuse, "transitions")):
        if isinstance(t, Mapping) and t.get("broker") == broker and t.get("event") == "isolate":
            return str(t.get("detail") or "")
    return ""
