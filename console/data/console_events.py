"""The console's part of the events log (broker_core.observe.events), each written as
it is seen, with the time it happened, never rewritten: alert edges, brokers' state
and role changes (a failover as the console saw it), and the fuse transitions of the
producers it watches (at the time the fuse made them).

Several consoles may watch one cluster; one writes its alerts, the first to take the
log's alert lock (an flock held while it runs, released by the kernel if it dies), so
the log holds each edge once. The others read.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from broker_core.observe.events import EventLog, read_events
from console.data.alerts import AlertLog

log = logging.getLogger("floodgate.console")


class ConsoleEvents:
    def __init__(self, path: str | os.PathLike, source: str = "console") -> None:
        self.log = EventLog(path, source)
        self.writer = False
        self._fuse_seen: set[tuple] = set()  # transitions written (the fuse repeats its last 100)
        self._fd: int | None = None
        lock = Path(f"{self.log.path}.alerts.lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.writer = True
            # what an earlier console wrote of the fuses' last 100 transitions: not again
            self._fuse_seen = {tuple(e["key"]) for e in read_events(self.log.path, kinds=("fuse",))
                               if isinstance(e.get("key"), list)}
        except OSError:  # another console writes them (or the directory is not ours)
            self.close()

    def record(self, before, after) -> int:
        """Append what state `after` (a ClusterState) saw since `before` (None: the
        first); how many events were written."""
        if not self.writer:
            return 0
        out = []
        for a in after.alerts.since(before.alerts if before is not None else AlertLog()):
            out.append(("alert", a.text if not a.cleared else a.message,
                        {"severity": a.severity, "subject": a.key, "at": a.time,
                         "cleared": a.cleared, "value": a.value, "unit": a.unit}))
        seen = {id(e) for e in before.events} if before is not None else set()
        for e in after.events:
            if id(e) not in seen:
                # (the controller logs the failover itself: this is what the console saw)
                out.append(("note", f"{e.broker} {e.text}", {
                    "subject": e.broker, "at": e.time,
                    "severity": "warning" if e.text.startswith("failover") else "info"}))
        for p in after.producers:
            for t in (p.fuse or {}).get("transitions") or ():
                key = (p.key, t.get("time"), t.get("broker"), t.get("event"))
                key = tuple(str(k) for k in key)
                if key in self._fuse_seen or not isinstance(t.get("wall_time"), (int, float)):
                    continue
                self._fuse_seen.add(key)
                why = f" ({t['reason']})" if t.get("reason") else ""
                detail = f": {t['detail']}" if t.get("detail") else ""
                out.append(("fuse", f"fuse of {p.name}: {t.get('event')} {t.get('broker')}"
                            f"{why}{detail}", {
                                "subject": str(t.get("broker")), "at": t["wall_time"],
                                "severity": "warning" if t.get("event") == "isolate"
                                else "info", "event": t.get("event"),
                                "reason": t.get("reason"), "producer": p.name,
                                "key": list(key)}))
        for kind, text, fields in out:
            try:
                self.log.append(kind, text, **fields)
            except OSError as exc:  # a full disk must not stop the console
                log.warning("events log %s: %s", self.log.path, exc)
                return 0
        return len(out)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.writer = False
