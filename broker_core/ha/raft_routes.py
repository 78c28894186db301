"""The clients' view of a cluster of raft groups: which member of each group leads.

The same face as `ha.routes.ZkRoutes` (masters, replicas, copies, wait, version,
changes, records), with no ZooKeeper to watch: threads hold HA_STATE watches on the
members (answered when the member's term or leader moves, or after WATCH_S), so routes
cost nothing while nothing changes. A member that does not answer, or knows no leader,
is left for the next one; the answer of the highest term wins. A producer refused with
NOT_MASTER reads `changes` as with ZooKeeper.

Each group is watched on WATCHERS members at once, never the same one twice. A member
paused (SIGSTOP) or cut off keeps its connection open and says nothing: a single watch
held there heard of the new leader only once the fault ended, though the others had
elected one within a second (the 30-minute chaos run: groups unwritable for 7.2-7.6 s
while a leader was isolated for 4-6 s). With two, one of them is on a member that answers.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence

from broker_core.errors import BrokerError
from broker_core.ha.group_routes import GroupRoutes
from broker_core.ha.records import GroupRecord

log = logging.getLogger("floodgate.routes")

WATCH_S = 20.0  # a watch held this long on a quiet group, then renewed
RETRY_S = 0.05  # after a member that does not answer or knows no leader
WATCHERS = 2  # members of a group watched at once: one silent member leaves another


class RaftRoutes(GroupRoutes):
    def __init__(self, members: Mapping[str, Sequence[str]], credentials=None,
                 tls_context=None) -> None:
        """`members`: group -> the TCP addresses of its members (the cluster file)."""
        self.members = {g: list(addrs) for g, addrs in members.items()}
        self.credentials, self.tls_context = credentials, tls_context
        self.records: dict[str, GroupRecord] = {}
        self.version = 0  # moves when a group's leader does
        self.changes = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.what = "leader"
        self._said: set[str] = set()  # members whose refusal was logged
        self._held: dict[tuple[str, int], int] = {}  # (group, watcher) -> member index

    def start(self, timeout: float = 10.0) -> RaftRoutes:
        for group in self.groups:
            for k in range(min(WATCHERS, len(self.members[group]))):
                self._held[(group, k)] = k
                t = threading.Thread(target=self._watch, args=(group, k), daemon=True,
                                     name=f"raft-routes-{group}-{k}")
                t.start()
                self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()  # each thread ends at its watch's next answer (or its connection's)

    def __enter__(self) -> RaftRoutes:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- watching ---------------------------------------------------------------------------
    def _watch(self, group: str, k: int) -> None:
        from broker_core.client.connection import Connection
        from broker_core.protocol import Code, Op, decode_json

        addrs, i, conn = self.members[group], self._held[(group, k)], None
        while not self._stop.is_set():
            rec = self.records.get(group)
            known = {"term": rec.epoch if rec else -1, "leader": rec.master if rec else "",
                     "wait_s": WATCH_S if rec else 0}
            try:
                if conn is None:
                    conn = Connection(addrs[i], connect_timeout=1.0,
                                      credentials=self.credentials, tls_context=self.tls_context)
                code, body = conn.call(Op.HA_STATE, json.dumps(known).encode(), WATCH_S + 5)
                doc = decode_json(body) if code == Code.OK else {}
                if code != Code.OK:
                    self._refused(group, addrs[i], f"{Code(code).name}: "
                                  f"{body.decode('utf-8', 'replace')[:200]}")
            except (BrokerError, OSError, TimeoutError):
                doc = {}
            if doc.get("leader") and doc.get("master_addr"):
                self._learn(group, doc)
                if doc["term"] >= known["term"]:
                    continue  # watch the same member again
            if conn is not None:
                conn.close()
                conn = None
            i = self._move(group, k, i)
            self._stop.wait(RETRY_S)
        if conn is not None:
            conn.close()

    def _move(self, group: str, k: int, i: int) -> int:
        """Watcher `k`'s next member after index `i`: one no other watcher holds."""
        n = len(self.members[group])
        with self._lock:
            others = {at for (g, w), at in self._held.items() if g == group and w != k}
            j = next((j % n for j in range(i + 1, i + n) if j % n not in others), (i + 1) % n)
            self._held[(group, k)] = j
        return j

    def _refused(self, group: str, addr: str, why: str) -> None:
        """A member that answers but refuses (no user, no permission): said once a
        member, not taken silently for a group without a leader."""
        if addr not in self._said:
            self._said.add(addr)
            log.warning("routes: raft group %s member %s refuses to say who leads: %s",
                        group, addr, why)

    def _learn(self, group: str, doc: dict) -> None:
        with self._lock:
            old = self.records.get(group)
            term = int(doc["term"])
            if old is not None and term < old.epoch:
                return  # a member behind the group's news
            in_sync = tuple(r["name"] for r in doc.get("replicas", []) if r.get("lag") == 0)
            record = GroupRecord(doc["leader"], term, (doc["leader"], *in_sync),
                                 doc["master_addr"])
            if old is not None and (old.master, old.epoch) == (record.master, record.epoch):
                return
            self.records = {**self.records, group: record}
            self.version += 1
            self.changes += 1
            self._changed.notify_all()

    # -- what clients ask -------------------------------------------------------------------
    def copies(self, group: str) -> int:
        """A raft group acknowledges what a majority holds."""
        return len(self.members.get(group, [])) // 2 + 1 if group in self.records else 0
