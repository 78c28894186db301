"""Is the chaos register's history linearizable? (cluster.chaos_register)

The object: a queue's end (how many messages it holds), moved only by a conditional
send that expected it (an append: from k to k + 1), read by a conditional send
refused CONFLICT ("at N": it was N). Every operation thus has a fixed place in any
order that could explain the history: its level, (k, after the reads of k) for an
append at k, (N, before the append at N) for a read of N. Such an order exists
exactly when no operation that finished before another began sits at a higher level
(Knossos and Porcupine search orders for objects where places are not fixed; here
sorting by level is the search, so one pass over the operations in the order they
began decides it). An operation of unknown outcome found in the queue is an append
at its offset that may have happened any time after it began; one not found never
happened.

Besides: every acknowledged append is in the queue at its offset (lost: not), no value
is in it twice, none from an operation refused CONFLICT, and each acknowledged
append took the offset it expected.
"""

from __future__ import annotations

from collections import Counter

INF = float("inf")
SHOWN = 5  # violations described in full


def check_register(events: list[dict]) -> dict:
    ops: dict[str, dict] = {}
    log: dict[int, str] = {}
    for ev in events:
        kind = ev["type"]
        if kind == "reg":
            ops[ev["op"]] = {"start": ev["t"], "end": INF, "expect": ev["expect"],
                             "value": ev["value"], "outcome": "pending"}
        elif kind == "reg-read":
            log[ev["offset"]] = ev["value"]
        elif (op := ops.get(ev.get("op"))) is not None:
            op["end"] = ev["t"]
            op["outcome"] = kind[4:]
            op["at"] = ev.get("offset", ev.get("end"))
    where = {v: off for off, v in log.items()}
    counts = Counter(log.values())
    out = {"ops": len(ops), "ok": 0, "conflicts": 0, "unknown": 0, "lost": 0,
           "duplicated": sum(n - 1 for n in counts.values() if n > 1), "conflict_stored": 0,
           "cas_violations": 0, "linearizable": True, "violations": []}
    levels = []  # (start, end, level, name)
    for name, op in ops.items():
        outcome = op["outcome"]
        if outcome == "ok":
            out["ok"] += 1
            at = op["at"]
            if log.get(at) != op["value"]:
                out["lost"] += 1
            if at != op["expect"]:
                out["cas_violations"] += 1
            levels.append((op["start"], op["end"], (at, 1), name))
        elif outcome == "conflict":
            out["conflicts"] += 1
            if op["value"] in where:
                out["conflict_stored"] += 1
            levels.append((op["start"], op["end"], (op["at"], 0), name))
        else:
            out["unknown"] += 1
            if op["value"] in where:  # it happened: an append at its offset, ends unknown
                levels.append((op["start"], INF, (where[op["value"]], 1), name))
    for name, later in _out_of_order(levels):
        out["linearizable"] = False
        if len(out["violations"]) < SHOWN:
            out["violations"].append(f"{name} ({_say(ops[name])}) finished before {later} "
                                     f"({_say(ops[later])}) began, yet comes after it")
    return out


def _out_of_order(levels: list[tuple]) -> list[tuple[str, str]]:
    """Pairs (A, B): A finished before B began but A's level is above B's."""
    found = []
    by_end = sorted(levels, key=lambda x: x[1])
    best, best_name, i = None, "", 0
    for start, _end, level, name in sorted(levels, key=lambda x: x[0]):
        while i < len(by_end) and by_end[i][1] < start:  # finished before this one began
            if best is None or by_end[i][2] > best:
                best, best_name = by_end[i][2], by_end[i][3]
            i += 1
        if best is not None and best > level:
            found.append((best_name, name))
    return found


def _say(op: dict) -> str:
    if op["outcome"] == "ok":
        return f"appended at {op['at']}"
    if op["outcome"] == "conflict":
        return f"saw the end at {op['at']}"
    return f"expected {op['expect']}, outcome {op['outcome']}"
