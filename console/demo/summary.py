"""What a headless demo run proves about the fuse, as plain data.

`summarize_run` is pure: from the fault actions, the fuse's transitions, its
per-broker isolation counts and the console's last state it says, per broker,
whether a fault was injected and how often the fuse isolated it; how many
isolations hit brokers that had no fault (each one a misjudgement: the demo's
healthy brokers answer in well under a millisecond); and, for every stall the
script injected, how long the fuse took to isolate the stalled broker. An
isolation of a faulted broker after its fault cleared is a misjudgement too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Goal (issue 14): the stalled broker isolated within 1 s of its first stall.
DETECT_WITHIN_S = 1.0
CLEAR_GRACE_S = 1.0


def stall_detection(actions: Sequence[Any], transitions: Sequence[Mapping[str, Any]],
                    now: float) -> list[dict[str, Any]]:
    """For each stall injected: when its broker was next isolated, and the delay.

    A broker already isolated (and not released) when its stall begins counts as
    isolated at once. `isolated_at` is None when the fuse never isolated it
    (or the run ended first: then `open` is True).
    """
    out = []
    for act in actions:
        if act.kind != "stall":
            continue
        mine = [t for t in transitions if t["broker"] == act.broker]
        before = [t for t in mine if t["time"] < act.time and t["event"] in ("isolate", "release")]
        if before and before[-1]["event"] == "isolate":
            isolated_at = act.time
        else:
            isolated_at = next((t["time"] for t in mine
                                if t["event"] == "isolate" and t["time"] >= act.time), None)
        delay = None if isolated_at is None else max(0.0, isolated_at - act.time)
        out.append({"broker": act.broker, "stall_at": act.time, "isolated_at": isolated_at,
                    "delay_s": delay,
                    "open": isolated_at is None and now - act.time < DETECT_WITHIN_S,
                    "within_goal": delay is not None and delay <= DETECT_WITHIN_S})
    return out


def fault_windows(actions: Sequence[Any]) -> dict[str, list[tuple[float, float]]]:
    """Per broker, when a fault was active: from its injection to the next clear
    (plus CLEAR_GRACE_S: answers already on their way), or open-ended."""
    windows: dict[str, list[tuple[float, float]]] = {}
    opened: dict[str, float] = {}
    for act in sorted(actions, key=lambda a: a.time):
        if act.kind == "clear":
            if act.broker in opened:
                windows.setdefault(act.broker, []).append(
                    (opened.pop(act.broker), act.time + CLEAR_GRACE_S))
        else:
            opened.setdefault(act.broker, act.time)
    for broker, start in opened.items():
        windows.setdefault(broker, []).append((start, float("inf")))
    return windows


def false_isolations(actions: Sequence[Any], transitions: Sequence[Mapping[str, Any]]
                     ) -> list[dict[str, Any]]:
    """Isolations that began while their broker had no fault: each one a misjudgement
    (the demo's healthy brokers answer in well under a millisecond)."""
    windows = fault_windows(actions)
    return [dict(t) for t in transitions if t["event"] == "isolate" and not any(
        start <= t["time"] <= end for start, end in windows.get(t["broker"], ()))]


def summarize_run(brokers: Iterable[Any], actions: Sequence[Any],
                  transitions: Sequence[Mapping[str, Any]], fuse: Mapping[str, Any],
                  now: float) -> dict[str, Any]:
    """Per-broker fault and isolation record, false isolations, stall detection.

    In a replicated demo the fuse judges groups and a fault hits a group's master:
    a row (a broker process) shows the faults that hit it, and, while it is its
    group's master, the isolations of its group."""
    faults: dict[str, list[str]] = {}  # by the fuse's names: groups, or brokers
    hit: dict[str, list[str]] = {}  # by broker process
    for act in actions:
        if act.kind != "clear":
            faults.setdefault(act.broker, []).append(act.kind)
            hit.setdefault(getattr(act, "node", "") or act.broker, []).append(act.kind)
    isolations = fuse.get("isolations_by_broker") or {}
    rows = []
    for b in brokers:
        judged = getattr(b, "group", None) if getattr(b, "role", None) == "MASTER" else b.name
        rows.append({"name": b.name, "state": b.state, "p99_s": b.p99, "max_s": b.max,
                     "faulted": b.name in hit, "faults": sorted(set(hit.get(b.name, []))),
                     "isolations": int(isolations.get(judged, 0)) if judged else 0})
    # the fuse's own count for brokers never faulted (exact even past the transitions
    # it keeps), plus isolations of faulted brokers outside their fault windows
    events = false_isolations(actions, transitions)
    never = sum(int(n) for name, n in isolations.items() if name not in faults)
    outside = sum(1 for t in events if t["broker"] in faults)
    return {"brokers": rows, "false_isolations": never + outside,
            "false_isolation_events": events,
            "stall_detection": stall_detection(actions, transitions, now),
            "client_lateness": fuse.get("client"),
            "excused": fuse.get("excused_total") or {}}


# The health goals of `make demo` (issue 58), judged on what its summary holds: each
# broker's figures are over the whole run (bench/demo_windows.py judges every 10 s window)
RATE_SHARE_GOAL = 0.95
MASTER_P99_GOAL_S, MASTER_MAX_GOAL_S = 0.005, 0.020
LATE_BEATS_GOAL = 0.10
KEEPING_UP_P99_GOAL_S = 0.005  # the consumer group that keeps up (clients.PARTS "fast")


def health_goals(run: Mapping[str, Any], keeping_up: str = "billing"
                 ) -> list[tuple[str, bool | None]]:
    """Each goal in words with whether `run` (the headless summary) met it; None where
    the run holds nothing to judge it by (no stall injected, no consumer delays)."""
    target, achieved = run.get("target_rate"), run.get("achieved_rate")
    share = achieved / target if target and achieved is not None else None
    healthy = [b for b in run["brokers"] if not b["faulted"] and b["p99_s"] is not None]
    p99 = max((b["p99_s"] for b in healthy), default=None)
    worst = max((b["max_s"] or 0.0 for b in healthy), default=None)
    late = run.get("client_lateness") or {}
    late_share = late["late_beats"] / late["beats"] if late.get("beats") else None
    stalls = run.get("stall_detection") or []
    delay = (run.get("consumer_delay") or {}).get(keeping_up)

    def ms(s: float | None) -> str:
        return "-" if s is None else f"{s * 1000:.2f} ms"

    return [
        (f"producer at {share or 0:.1%} of its rate (>= {RATE_SHARE_GOAL:.0%})",
         None if share is None else share >= RATE_SHARE_GOAL),
        (f"fault-free masters UP, send p99 {ms(p99)} (<= {ms(MASTER_P99_GOAL_S)}) and max "
         f"{ms(worst)} (<= {ms(MASTER_MAX_GOAL_S)}) over the run",
         None if p99 is None else all(b["state"] == "UP" for b in healthy)
         and p99 <= MASTER_P99_GOAL_S and worst <= MASTER_MAX_GOAL_S),
        (f"every stall out of routing within {DETECT_WITHIN_S:g} s",
         all(s["within_goal"] for s in stalls) if stalls else None),
        (f"{run['false_isolations']} isolations of brokers without a fault (0)",
         run["false_isolations"] == 0),
        (f"the producer late on {late_share or 0:.1%} of its beats (<= {LATE_BEATS_GOAL:.0%})",
         None if late_share is None else late_share <= LATE_BEATS_GOAL),
        (f"{keeping_up}'s send -> in hand p99 {ms(delay and delay['p99_s'])} "
         f"(<= {ms(KEEPING_UP_P99_GOAL_S)})",
         None if not delay else delay["p99_s"] <= KEEPING_UP_P99_GOAL_S),
    ]
