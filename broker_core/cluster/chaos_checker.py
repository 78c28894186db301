"""What a chaos run lost: a checker over its history, as Jepsen's and openchaos's.

The history is JSON lines, one event each, in the order they happened (`t`: seconds
since the run began):

    {"t": 1.20, "type": "send", "key": "k3", "seq": 17, "ordered": false}
    {"t": 1.21, "type": "ack", "key": "k3", "seq": 17, "group": "group-1",
     "master": "group-1-a", "status": "SEND_OK"}
    {"t": 1.30, "type": "fail", "key": "k3", "seq": 18, "reason": "..."}
    {"t": 2.00, "type": "nemesis", "action": "start", "fault": {...}}
    {"t": 2.40, "type": "master", "group": "group-1", "master": "group-1-b", "epoch": 2}
    {"t": 9.00, "type": "deliver", "key": "k3", "seq": 17}      # the consumer group
    {"t": 99.0, "type": "read", "key": "k3", "seq": 17, "group": "group-1",
     "queue": 0, "offset": 5}                                    # the final read-back

What it finds:
- lost: acknowledged, never read back (the run fails on any);
- duplicates: read back more than once (a retry after a lost answer), and delivered
  to the consumer group more than once (at-least-once: counted, not failed);
- order violations: for keys whose sends promised order, the read-back order of a
  key within its queue against its acknowledged sequence;
- split brain: an acknowledgement from a master for a send begun after ZooKeeper
  had named another master of its group at a higher epoch (the run fails on any);
- unavailability: each window from a failed send to the next acknowledged one;
- failovers: each change of a group's master, its epoch, and how long after it the
  new master acknowledged its first send.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path


@dataclass
class ChaosReport:
    sends: int = 0
    acked: int = 0
    failed: int = 0
    read_back: int = 0
    lost: int = 0
    lost_sample: list[str] = field(default_factory=list)
    duplicates_stored: int = 0
    delivered: int = 0
    duplicates_delivered: int = 0
    not_delivered: int = 0  # acked, read back, never given to the consumer group
    order_checked_keys: int = 0
    order_violations: int = 0
    order_sample: list[str] = field(default_factory=list)
    split_brain_acks: int = 0
    split_brain_sample: list[str] = field(default_factory=list)
    unavailable: list[dict] = field(default_factory=list)  # {from, to, seconds}
    failovers: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.split_brain_acks == 0 and self.order_violations == 0

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def load_history(path: str | Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    raise ValueError(f"{path}:{n}: not a JSON event") from None
    return out


def check(history: Iterable[dict]) -> ChaosReport:
    r = ChaosReport()
    acks: dict[tuple[str, int], dict] = {}
    invoked: dict[tuple[str, int], float] = {}
    ordered_keys: set[str] = set()
    reads: Counter = Counter()
    read_order: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    delivered: Counter = Counter()
    masters: dict[str, list[tuple[float, str, int]]] = defaultdict(list)  # group -> changes
    down_since: float | None = None
    open_faults: dict[str, dict] = {}
    for ev in history:
        kind, t = ev.get("type"), float(ev.get("t", 0.0))
        if kind == "send":
            r.sends += 1
            invoked[(ev["key"], ev["seq"])] = t
            if ev.get("ordered"):
                ordered_keys.add(ev["key"])
        elif kind == "ack":
            acks[(ev["key"], ev["seq"])] = {**ev, "t0": invoked.get((ev["key"], ev["seq"]), t)}
            if down_since is not None:
                r.unavailable.append({"from": down_since, "to": t,
                                      "seconds": round(t - down_since, 3)})
                down_since = None
        elif kind == "fail":
            r.failed += 1
            if down_since is None:
                down_since = invoked.get((ev["key"], ev["seq"]), t)
        elif kind == "read":
            reads[(ev["key"], ev["seq"])] += 1
            read_order[(ev["key"], ev["group"], ev["queue"])].append((ev["offset"], ev["seq"]))
        elif kind == "deliver":
            delivered[(ev["key"], ev["seq"])] += 1
        elif kind == "master":
            masters[ev["group"]].append((t, ev["master"], int(ev["epoch"])))
        elif kind == "nemesis":
            fid = json.dumps(ev["fault"], sort_keys=True)
            if ev["action"] == "start":
                open_faults[fid] = {"fault": ev["fault"], "start": t}
            elif fid in open_faults:
                f = open_faults.pop(fid)
                r.faults.append({**f, "end": t})
    if down_since is not None:
        r.unavailable.append({"from": down_since, "to": None, "seconds": None})
    r.faults += [{**f, "end": None} for f in open_faults.values()]

    r.acked = len(acks)
    r.read_back = sum(reads.values())
    lost = sorted(f"{k}#{s}" for (k, s) in acks if reads[(k, s)] == 0)
    r.lost, r.lost_sample = len(lost), lost[:20]
    r.duplicates_stored = sum(n - 1 for n in reads.values() if n > 1)
    r.delivered = sum(delivered.values())
    r.duplicates_delivered = sum(n - 1 for n in delivered.values() if n > 1)
    if delivered:
        r.not_delivered = sum(1 for ks in acks if reads[ks] and not delivered[ks])

    _check_order(r, ordered_keys, read_order)
    _check_masters(r, acks, masters)
    return r


def _check_order(r: ChaosReport, ordered_keys: set[str],
                 read_order: dict[tuple[str, str, int], list[tuple[int, int]]]) -> None:
    """A key's records in its queue, by offset, must carry increasing sequence numbers
    (a retried duplicate of one already there is a duplicate, counted as such)."""
    r.order_checked_keys = len(ordered_keys)
    for (key, group, queue), records in read_order.items():
        if key not in ordered_keys:
            continue
        last, seen = -1, set()
        for offset, seq in sorted(records):
            if seq in seen:
                continue
            seen.add(seq)
            if seq < last:
                r.order_violations += 1
                if len(r.order_sample) < 20:
                    r.order_sample.append(f"{key}: #{seq} after #{last} ({group} queue "
                                          f"{queue} offset {offset})")
            last = max(last, seq)


def _check_masters(r: ChaosReport, acks: dict, masters: dict) -> None:
    by_group: dict[str, list[dict]] = defaultdict(list)
    for ack in acks.values():
        by_group[ack.get("group", "")].append(ack)
    for group, changes in masters.items():
        changes.sort()
        group_acks = by_group.get(group, [])
        for (_t0, old, _e0), (t, new, epoch) in pairwise(changes):
            after = [a["t"] for a in group_acks if a["master"] == new and a["t"] >= t]
            r.failovers.append({"group": group, "from": old, "to": new, "epoch": epoch,
                                "at": t, "first_ack_after_s":
                                round(min(after) - t, 3) if after else None})
        for ack in group_acks:
            named = [c for c in changes if c[0] <= ack["t0"]]  # ZooKeeper's view at the send
            if not named or named[-1][1] == ack["master"]:
                continue
            t, master, epoch = named[-1]
            r.split_brain_acks += 1
            if len(r.split_brain_sample) < 20:
                r.split_brain_sample.append(
                    f"{ack['key']}#{ack['seq']} begun at {ack['t0']:.2f} s, acked by "
                    f"{ack['master']} at {ack['t']:.2f} s; ZooKeeper had named {master} "
                    f"master at epoch {epoch} at {t:.2f} s")
