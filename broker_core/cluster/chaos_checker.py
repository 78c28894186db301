"""What a chaos run lost: a checker over its history, as Jepsen's and openchaos's.

The history is JSON lines, one event each, in the order they happened (`t`: seconds
since the run began):

    {"t": 1.20, "type": "send", "key": "k3", "seq": 17, "ordered": false}
    {"t": 1.21, "type": "ack", "key": "k3", "seq": 17, "group": "group-1",
     "master": "group-1-a", "status": "SEND_OK"}
    {"t": 1.30, "type": "fail", "key": "k3", "seq": 18, "group": "group-1", "reason": "..."}
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
- split brain: an acknowledgement from a deposed master for a send begun after
  ZooKeeper had named another master of its group at a higher epoch (the run fails
  on any);
- unavailability: per group, each window from a failed send (its last attempt's
  group) to the group's next acknowledged one;
- failovers: each change of a group's master, its epoch, how long after it the new
  master acknowledged its first send, and the group's unavailability window around it
  (0: no send failed);
- the fuse: each isolation of a group by the producer's fuse and the fault that
  explains it (none: an unjustified isolation), and for a loss or delay fault how
  soon its group was isolated.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

from broker_core.cluster.register_checker import check_register

FUSE_GRACE_S = 5.0
# a change of master reaches the run's watcher this late at most (a ZooKeeper watch,
# then a poll every 50 ms): an ack by the *next* master this soon is not split brain
OBSERVED_LATE_S = 1.0


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
    unavailable: list[dict] = field(default_factory=list)  # {group, from, to, seconds}
    failovers: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    fuse_isolations: list[dict] = field(default_factory=list)  # {group, at, reason, fault}
    fuse_unjustified: int = 0  # isolations of a group no fault touched
    # the exactly-once pipeline (cluster.chaos_pipeline), when it ran: {drained, inputs,
    # outputs, lost, duplicated, aborted_reads, order_violations, commits, aborted,
    # unknown, samples}
    pipeline: dict = field(default_factory=dict)
    # the register (cluster.chaos_register), when it ran (cluster.register_checker): {ops,
    # ok, conflicts, unknown, lost, duplicated, conflict_stored, cas_violations,
    # linearizable, violations}
    register: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        p, g = self.pipeline, self.register
        return (self.lost == 0 and self.split_brain_acks == 0 and self.order_violations == 0
                and not (p and (p["lost"] or p["duplicated"] or p["aborted_reads"]
                                or p["order_violations"] or not p["drained"]))
                and not (g and (g["lost"] or g["duplicated"] or g["conflict_stored"]
                                or g["cas_violations"] or not g["linearizable"])))

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
    down_since: dict[str, float] = {}  # group -> its first failed send not yet followed
    last_ack: dict[str, float] = {}  # by an ack from that group
    open_faults: dict[str, dict] = {}
    isolations: list[dict] = []
    pipeline: list[dict] = []  # its events, checked apart
    register: list[dict] = []  # and the register's
    for ev in history:
        kind, t = ev.get("type"), float(ev.get("t", 0.0))
        if kind in ("xform", "out", "pipeline"):
            pipeline.append(ev)
            continue
        if kind.startswith("reg"):
            register.append(ev)
            continue
        if kind == "send":
            r.sends += 1
            invoked[(ev["key"], ev["seq"])] = t
            if ev.get("ordered"):
                ordered_keys.add(ev["key"])
        elif kind == "ack":
            acks[(ev["key"], ev["seq"])] = {**ev, "t0": invoked.get((ev["key"], ev["seq"]), t)}
            group = ev.get("group", "")
            last_ack[group] = t
            if group in down_since:
                since = down_since.pop(group)
                r.unavailable.append({"group": group, "from": since, "to": t,
                                      "seconds": round(t - since, 3)})
        elif kind == "fail":
            r.failed += 1
            group = ev.get("group", "")
            if group not in down_since:  # from the send that failed, not before the last ack
                down_since[group] = max(invoked.get((ev["key"], ev["seq"]), t),
                                        last_ack.get(group, 0.0))
        elif kind == "read":
            reads[(ev["key"], ev["seq"])] += 1
            read_order[(ev["key"], ev["group"], ev["queue"])].append((ev["offset"], ev["seq"]))
        elif kind == "deliver":
            delivered[(ev["key"], ev["seq"])] += 1
        elif kind == "master":
            masters[ev["group"]].append((t, ev["master"], int(ev["epoch"])))
        elif kind == "fuse":
            if ev["action"] == "isolate":
                isolations.append({"group": ev["group"], "at": t, "reason": ev.get("reason"),
                                   "until": None})
            else:
                for iso in isolations:
                    if iso["group"] == ev["group"] and iso["until"] is None:
                        iso["until"] = t
        elif kind == "nemesis":
            fid = json.dumps(ev["fault"], sort_keys=True)
            if ev["action"] == "start":
                open_faults[fid] = {"fault": ev["fault"], "start": t}
            elif fid in open_faults:
                f = open_faults.pop(fid)
                r.faults.append({**f, "end": t})
    r.unavailable += [{"group": g, "from": since, "to": None, "seconds": None}
                      for g, since in down_since.items()]
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
    for fo in r.failovers:  # the group's window around it: failed sends to the next ack
        around = [w for w in r.unavailable if w["group"] == fo["group"] and w["from"] <= fo["at"]
                  and (w["to"] is None or w["to"] >= fo["at"])]
        fo["unavailable_s"] = around[0]["seconds"] if around else 0.0
    _check_fuse(r, isolations)
    if pipeline:
        r.pipeline = check_pipeline(pipeline, set(reads))
    if register:
        r.register = check_register(register)
    return r


def check_pipeline(events: list[dict], inputs: set[tuple[str, int]]) -> dict:
    """The exactly-once pipeline's verdict, Jepsen's Kafka checks for a transform: every
    input stored (`inputs`, read back) is in the output once, no output comes from a
    transaction reported aborted, and each input queue's messages keep their order."""
    aborted: set[str] = set()
    outcomes: Counter = Counter()
    outs: Counter = Counter()
    aborted_reads: list[str] = []
    order: dict[tuple, list[int]] = defaultdict(list)  # (group, out queue, input queue)
    drained = False
    for ev in events:
        if ev["type"] == "pipeline":
            drained = bool(ev.get("drained"))
        elif ev["type"] == "xform":
            outcomes[ev["outcome"]] += 1
            if ev["outcome"] == "aborted":
                aborted.update(ev.get("halves") or ())
        else:
            outs[(ev["key"], ev["seq"])] += 1
            if ev.get("half") in aborted:
                aborted_reads.append(f"{ev['key']}#{ev['seq']}")
            _topic, qid, offset = str(ev.get("made_from") or "::-1").rsplit(":", 2)
            order[(ev["group"], ev["queue"], qid)].append(int(offset))
    lost = sorted(f"{k}#{s}" for (k, s) in inputs if not outs[(k, s)])
    backwards = [f"{g}/{q} from input queue {iq}" for (g, q, iq), offsets in order.items()
                 if any(b < a for a, b in pairwise(offsets))]
    return {"drained": drained, "inputs": len(inputs), "outputs": sum(outs.values()),
            "lost": len(lost), "duplicated": sum(n - 1 for n in outs.values() if n > 1),
            "aborted_reads": len(aborted_reads), "order_violations": len(backwards),
            "commits": outcomes["committed"], "aborted": outcomes["aborted"],
            "unknown": outcomes["unknown"],
            "samples": {"lost": lost[:10], "aborted_reads": aborted_reads[:10],
                        "order": backwards[:10]}}


def _check_fuse(r: ChaosReport, isolations: list[dict]) -> None:
    """Each isolation by the producer's fuse, with the fault that explains it: one on
    the group's path (its `groups`) in force from FUSE_GRACE_S before to the isolation
    (a fault just healed still slows its calls), or a failover of the group then.
    Faults record their start and end; `detect_s` on a loss or delay fault is how soon
    the fuse isolated its group."""
    for iso in isolations:
        t, g = iso["at"], iso["group"]
        cause = next((f for f in r.faults if g in f["fault"].get("groups", ())
                      and f["start"] <= t and (f["end"] is None or f["end"] + FUSE_GRACE_S >= t)),
                     None)
        if cause is None and any(fo["group"] == g and t - FUSE_GRACE_S <= fo["at"] <= t
                                 for fo in r.failovers):
            cause = {"fault": {"kind": "failover"}}
        r.fuse_isolations.append({**iso, "fault": cause["fault"]["kind"] if cause else None})
        r.fuse_unjustified += cause is None
    for f in r.faults:
        if f["fault"]["kind"] in ("loss", "delay"):
            mine = [i for i in isolations if i["group"] in f["fault"].get("groups", ())]
            if any(i["at"] <= f["start"] and (i["until"] is None or i["until"] > f["start"])
                   for i in mine):
                f["fuse_detect_s"] = 0.0  # isolated already (an earlier fault's minute)
                continue
            hits = [i["at"] - f["start"] for i in mine if i["at"] >= f["start"]
                    and (f["end"] is None or i["at"] <= f["end"])]
            f["fuse_detect_s"] = round(min(hits), 3) if hits else None


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
            if any(c[1] == ack["master"] and c[2] > epoch and c[0] <= ack["t"] + OBSERVED_LATE_S
                   for c in changes):
                continue  # the next master, acking before the change reached the watcher
            r.split_brain_acks += 1
            if len(r.split_brain_sample) < 20:
                r.split_brain_sample.append(
                    f"{ack['key']}#{ack['seq']} begun at {ack['t0']:.2f} s, acked by "
                    f"{ack['master']} at {ack['t']:.2f} s; ZooKeeper had named {master} "
                    f"master at epoch {epoch} at {t:.2f} s")
