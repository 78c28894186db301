"""The isolation list: brokers isolated now, earliest first, split at the cap,
with the transitions log and counters. Callers hold the fuse's lock."""

from __future__ import annotations

from collections import deque

from fuse.state import EVENTS, REASONS, BrokerState, Transition

TRANSITIONS_KEPT = 100


class IsolationList:
    def __init__(self) -> None:
        self.entries: list[BrokerState] = []  # in isolation order, earliest first
        self.transitions: deque[Transition] = deque(maxlen=TRANSITIONS_KEPT)
        self.transitions_total = dict.fromkeys(EVENTS, 0)
        self.isolations_total = dict.fromkeys(REASONS, 0)
        self.overflow_total = 0

    def log(self, now: float, broker: str, event: str, reason: str, detail: str = "") -> None:
        self.transitions.append(Transition(now, broker, event, reason, detail))
        self.transitions_total[event] += 1

    def add(self, state: BrokerState, now: float, reason: str, detail: str = "") -> None:
        """`state` was just isolated (its times already set): it goes last."""
        state.isolated = True
        state.overflow = False
        self.entries.append(state)
        self.isolations_total[reason] += 1
        self.log(now, state.name, "isolate", reason, detail)

    def release(self, state: BrokerState, now: float, reason: str) -> None:
        self.entries.remove(state)
        state.isolated = False
        state.overflow = False
        state.released_at = now
        self.log(now, state.name, "release", reason)

    def split(self, cap: int, now: float) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, overflow): the earliest isolated beyond `cap` serve again (rule 4)."""
        spill = max(0, len(self.entries) - cap)
        for index, state in enumerate(self.entries):
            overflow = index < spill
            if overflow and not state.overflow:
                self.overflow_total += 1
                self.log(now, state.name, "overflow", "cap")
            elif state.overflow and not overflow:
                self.log(now, state.name, "reexclude", "cap")
            state.overflow = overflow
        return (frozenset(st.name for st in self.entries[spill:]),
                frozenset(st.name for st in self.entries[:spill]))
