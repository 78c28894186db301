"""The demo's scripts in words: what they will do (the console's opening note) and what
they are doing now (its header), so that an isolated master or a STALLED consumer group
is read beside the act that made it, not taken for a defect of the demo.

The words come from the scripts themselves (`script.FAULT_SCRIPT`, `HA_FAULT_SCRIPT`,
`clients.WAREHOUSE_SCRIPT`); the clients' cycle starts a second or two after the faults'
(their process sets up first), so the header's consumer phases are that approximate.
"""

from __future__ import annotations

import math

from console.demo.clients import WAREHOUSE_GROUP, script_phases, script_story
from console.demo.script import (
    CYCLE_S,
    FAULT_SCRIPT,
    HA_FAULT_SCRIPT,
    fault_kind,
    script_targets,
)

SHOWN_S = 15.0  # a moment's act (a kill, a rewind) stays in the header this long


def scripted_acts(groups: int, faults: bool, clients: bool, brokers: int = 6) -> str:
    """What the demo's scripts will do and when: the console's opening note."""
    acts = []
    if faults:
        acts.append("faults: " + ", ".join(words for _start, _until, words
                                           in _fault_acts(groups, brokers)))
    if clients:
        acts.append(f"consumer group {WAREHOUSE_GROUP} {script_story()}")
    return "; ".join(acts) or "no faults and no consumers (--no-faults --no-clients)"


def _fault_acts(groups: int, brokers: int) -> list[tuple[float, float, str]]:
    """(from, until, words) for each act of the fault script, in cycle seconds."""
    script = HA_FAULT_SCRIPT if groups else FAULT_SCRIPT
    # as Demo._target folds them: group-3's act on group-2 of a 2-group cluster
    targets = ({n: min(n, groups) for _at, n, _b in script} if groups
               else script_targets(brokers))
    acts = []
    for i, (at, number, body) in enumerate(script):
        kind = fault_kind(body)
        name = f"group-{targets[number]}" if groups else f"broker-{targets[number]}"
        who = f"{name}'s master" if groups else name
        if kind in ("stall", "errors"):
            until = next((a for a, n, b in script[i + 1:] if n == number and b is None),
                         CYCLE_S)
            what = (f"{who} stalls" if kind == "stall"
                    else f"{who} answers {body['error_rate'] * 100:g} % errors")
            acts.append((at, until, f"{what} ({at:g}-{until:g} s)"))
        elif kind == "kill":
            acts.append((at, at + SHOWN_S, f"{who} killed at {at:g} s: its slave takes over"))
        elif kind == "rewind":
            acts.append((at, at + SHOWN_S, f"{body['rewind_group']}'s offsets moved "
                                           f"{body['back_s']:g} s back at {at:g} s"))
    return acts


def _warehouse_now(at: float) -> str:
    for start, end, share in script_phases():
        if start <= at < end and not math.isinf(share):
            state = "hung" if share == 0 else "behind"
            return f"{WAREHOUSE_GROUP} {state} ({start:g}-{end:g} s)"
    return ""


def now_playing(elapsed: float, groups: int, brokers: int, faults: bool = True,
                clients: bool = True) -> str:
    """What the scripts do `elapsed` seconds after they started, in a few words, e.g.
    "0:47 · group-3's master answers 20 % errors (45-75 s) · warehouse behind (20-50 s)"."""
    at = elapsed % CYCLE_S
    parts = [f"{int(at // 60)}:{int(at % 60):02d}"]
    if faults:
        acts = _fault_acts(groups, brokers)
        now = [words for start, until, words in acts if start <= at < until]
        coming = next((a for a in acts if a[0] > at), None)
        parts += now or ["no fault injected now" + (
            f", next at {coming[0]:g} s" if coming else "")]
    if clients and (warehouse := _warehouse_now(at)):
        parts.append(warehouse)
    return " · ".join(parts)
