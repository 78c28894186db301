"""What a raft group's member reports (`status`, the console, /metrics): its role,
term and leader, and on the leader each member's match index and lag, also in the
shape a master/slave group reports its slaves (so one console reads both modes)."""

from __future__ import annotations

from broker_core.ha.node import Role


def figures(group) -> dict:
    node = group.node
    doc = {"group": group.group, "consensus": "raft", "role": group.role.value,
           "epoch": node.term, "term": node.term, "leader": node.leader or "",
           "master": node.leader or "", "master_addr": group.addrs.get(node.leader, ""),
           "since": group.since, "commit": node.commit,
           "last_index": group.storage.last_index(), "replication": "raft",
           "events": list(group.events)[-10:], "links": group.transport.connected(),
           **group.counters, **{f"link_{k}": v for k, v in group.transport.counters.items()}}
    doc["members"] = len(node.voters)
    doc["voters"], doc["learners"] = sorted(node.voters), sorted(node.learners)
    doc["config_index"] = node.config_index
    doc.update({k: v for k, v in node.counters.items() if k.startswith("snapshot")})
    if group.role is Role.MASTER:  # what each member holds of the log (match, lag)
        last, end = group.storage.last_index(), group.storage.end_offset()
        index = group.storage.index
        doc["replicas"] = [{"name": p, "match": node.match.get(p, 0),
                            "lag": last - node.match.get(p, 0),
                            **({"learner": True} if p not in node.voters else {})}
                           for p in node.peers]
        # as a master's slaves: those holding everything committed are "in sync"
        doc["in_sync"] = sorted(p for p in node.peers
                                if node.match.get(p, 0) >= node.commit)
        now = group._loop.time()
        doc["slaves"] = [{"name": p, "in_sync": p in doc["in_sync"],
                          "lag_bytes": end - index.end_of(min(node.match.get(p, 0), last)),
                          "lag_s": 0.0 if p in doc["in_sync"]
                          else behind_s(group, p, now)}
                         for p in node.peers]
    return doc


def behind_s(group, peer: str, now: float) -> float:
    """How long the oldest entry `peer` lacks (the one after its match) has waited
    (ha.append_marks, as a master tells its slave's): a member that answers every beat
    but takes no entry (its store refuses them) falls behind by the second, where the
    time since its last answer stays under a beat. Behind every mark: at least as long
    as the oldest; none proposed this term: the time since it last answered."""
    node, marks = group.node, group.marks
    marks.prune(min(node.match.values(), default=None), group.storage.last_index())
    match = node.match.get(peer, 0)
    since = marks.oldest_unacked(match) if match >= marks.floor else \
        (marks.times[0] if marks.times else None)
    if since is None:
        return max(0.0, now - node.heard.get(peer, now))
    return max(0.0, now - since)
