"""The offsets table of one consumer group (the groups screen's `o`): each broker's
/admin/offsets (what `floodgate offsets show` prints), asked off the UI thread.

Slaves are skipped (their master's copy, up to a second old). A broker that does not
answer, or refuses (the admin API is held to loopback or a token), is named in the
view's errors; the others are shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OffsetsView:
    group: str
    queues: tuple[dict[str, Any], ...] = ()  # {broker, topic, queue, committed, max, lag, ...}
    instances: tuple[dict[str, Any], ...] = ()  # a broadcast group's, per instance and queue
    errors: tuple[str, ...] = field(default=())

    @property
    def lag(self) -> int:
        return sum(q["lag"] for q in self.queues) + sum(q["lag"] for q in self.instances)


def fetch(brokers: Sequence[tuple[str, str]], group: str, token: str | None = None,
          timeout: float = 2.0) -> OffsetsView:
    """`brokers`: (name, HTTP address) as the console polls them."""
    from broker_core.client.admin import AdminError, offsets

    queues, instances, errors = [], [], []
    for name, http in brokers:
        try:
            doc = offsets(http, token=token, query={"group": group}, timeout=timeout)
        except AdminError as exc:
            errors.append(f"{name}: {exc}")
            continue
        if doc.get("role") == "SLAVE":
            continue
        queues += [{"broker": name, **q} for q in doc.get("queues", [])]
        instances += [{"broker": name, **q} for q in doc.get("instances", [])]
    return OffsetsView(group, tuple(sorted(queues, key=_worst_first)),
                       tuple(sorted(instances, key=lambda q: (q["instance"], *_worst_first(q)))),
                       tuple(errors))


def _worst_first(q: dict[str, Any]) -> tuple:
    return (-q["lag"], q["topic"], q["broker"], q["queue"])
