"""What a raft group's member reports (`status`, the console, /metrics): its term,
leader and members; on the leader each member's match (the offset it acknowledged) and
lag, also as a master's slaves, so that one console reads every mode."""

from __future__ import annotations

from broker_core.ha.node import Role


def figures(group) -> dict:
    e, end, master = group.election, group.end(), group.master
    doc = {"group": group.group, "consensus": "raft",
           "role": group.role.value, "epoch": e.term, "term": e.term,
           "leader": e.leader or "", "master": e.leader or "",
           "master_addr": group.addrs.get(e.leader, ""), "since": group.since,
           "commit": master.committed if group.role is Role.MASTER else
           (group.follower.commit if group.follower else -1),
           "last_index": end, "replication": "raft", "events": list(group.events)[-10:],
           "links": group.transport.connected(), "members": len(e.voters),
           "voters": sorted(e.voters), "learners": sorted(e.learners),
           "config_index": group.config_offset, **group.counters, **master.counters}
    if group.role is Role.MASTER:
        acked, commit = master.acked, master.committed
        doc["replicas"] = [{"name": p, "match": acked.get(p, 0), "lag": end - acked.get(p, 0),
                            **({"learner": True} if p not in e.voters else {})}
                           for p in e.peers]
        doc["in_sync"] = sorted(p for p in e.peers if acked.get(p, -1) >= commit)
        doc["slaves"] = [{"name": p, "in_sync": p in doc["in_sync"],
                          "lag_bytes": max(0, end - acked.get(p, 0)),
                          "lag_s": master.lag(master.links[p])[1] if p in master.links
                          else 0.0} for p in e.peers]
    elif group.follower is not None:
        doc["following"] = group.follower.figures()
    return doc
