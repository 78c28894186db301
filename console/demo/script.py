"""The demo's fault script: what happens to which broker, and when, in a cycle of
`CYCLE_S` seconds. `runner.Demo` plays it; `narration` puts it in words for the console;
`summary` reads what it did (`FaultAction`); the clients process (`clients`) keeps its
consumer groups' cycle in step with it.

Single-copy brokers: act 1, broker #2 stalls like a PageCache stall (the Double-11 talk's heatmap)
and is isolated at once; its stalls end, and while it is still isolated broker #4 answers
20 % of sends with errors. The cap then being full, the fuse's rule 4 (the earliest isolated serve again) puts #2, isolated earliest
and healthy again, back in service as overflow. Then #4 clears too.
Replicated groups (`make demo`): the same acts on group-2's and group-3's masters; act 3
SIGKILLs group-1's master (the controller promotes its slave, the supervisor brings the
killed broker back as the new slave); then the warehouse consumer group is moved back
30 s, consumers online.
"""

from __future__ import annotations

from dataclasses import dataclass

DEMO_TOPIC = "demo"  # the topic the demo's producer sends to and its groups consume
STALLS = {"stall_ms": 800.0, "stall_every_s": 3.0, "stall_random": True}
ERRORS = {"error_rate": 0.2}
# (seconds into the cycle, broker number (1-based), fault body or None to clear)
FAULT_SCRIPT: tuple[tuple[float, int, dict | None], ...] = (
    (6.0, 2, STALLS),  # act 1: busy answers (fast failure) and slow calls: isolated at once
    (36.0, 2, None),  # its stalls end; it stays isolated for its minute
    (45.0, 4, ERRORS),  # act 2: isolated for errors; the cap sends #2 back (rule 4)
    (75.0, 4, None),
)
CYCLE_S = 150.0
# Replicated demo: the same acts on groups 2 and 3 (their masters), then a kill.
KILL = {"kill": True}
REWIND = {"rewind_group": "warehouse", "back_s": 30.0}
HA_FAULT_SCRIPT: tuple[tuple[float, int, dict | None], ...] = (
    *FAULT_SCRIPT[:2],
    (45.0, 3, ERRORS),
    (75.0, 3, None),
    (95.0, 1, KILL),  # act 3: group-1's master dies; its slave takes over within seconds
    # ... and the warehouse group is moved back 30 s (`floodgate offsets reset --to-time`),
    # consumers online: it reads the last 30 s again
    (125.0, 1, REWIND),
)


@dataclass
class FaultAction:
    time: float  # wall clock, taken before the broker was asked: the fault cannot start earlier
    broker: str  # the name the fuse knows: the broker, or its group in a replicated demo
    action: str
    kind: str = ""  # stall | errors | clear | kill | rewind (a consumer group moved back)
    node: str = ""  # the broker process it hit (a group's master), when not `broker`


def fault_kind(body: dict | None) -> str:
    if body is None:
        return "clear"
    if body.get("kill"):
        return "kill"
    if body.get("rewind_group"):
        return "rewind"
    return "stall" if body.get("stall_ms") else "errors" if body.get("error_rate") else "other"


def script_targets(n: int) -> dict[int, int]:
    """Broker number in the script -> broker number in a cluster of n (small clusters fold)."""
    return {k: min(k, n) for k in (2, 4)} if n >= 4 else {2: min(2, n), 4: n}
