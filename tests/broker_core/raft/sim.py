"""A seeded, event-driven network of in-process Raft nodes: messages lost, delayed,
duplicated and reordered, nodes crashed (everything lost but their storage) and
restarted, links cut; time is virtual, so a schedule of minutes runs in milliseconds.

The invariants are checked as it runs (`Sim.check`), each a Raft safety property:

- election safety: at most one leader a term;
- log matching: two logs with an entry of the same index and term hold the same
  entries up to it;
- state machine safety: no two nodes commit different entries at an index (and a
  node never cuts below its own commit: the core refuses to);
- leader completeness: a leader holds every entry committed before it.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.errors import StoreCorruptError
from broker_core.raft.log import MemoryStorage
from broker_core.raft.messages import Append
from broker_core.raft.node import NotLeader, RaftNode, Role


@dataclass
class Faults:
    loss: float = 0.0
    duplicate: float = 0.0
    delay: tuple[float, float] = (0.001, 0.01)  # uniform: reordering comes with it
    crash_every_s: float = 0.0  # mean time between crashes (0: none)
    down_s: tuple[float, float] = (0.5, 3.0)
    cut_every_s: float = 0.0  # mean time between link cuts (a partition of one node)
    cut_s: tuple[float, float] = (0.5, 4.0)
    wrong_gone: float = 0.0  # the chance a step tells a node its live leader is gone


@dataclass
class Sim:
    names: list[str]
    seed: int
    faults: Faults = field(default_factory=Faults)
    election_s: float = 0.3
    heartbeat_s: float = 0.05
    pre_vote: bool = True
    # a node's storage, opened again after a crash: (name, the old one or None) -> it
    storage_factory: Callable[[str, object], object] = lambda _name, old: old or MemoryStorage()
    # what a leader proposes: (its storage, the proposal's number) -> the entry's data
    payload: Callable[[object, int], bytes] = lambda _storage, n: f"v{n}".encode()
    joiners: tuple[str, ...] = ()  # nodes outside the first configuration (they join)
    # called at every proposal round (a test's membership changes, compactions)
    on_round: Callable[[Sim], None] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = 0.0
        self.committed: dict[int, tuple[int, bytes]] = {}  # index -> (term, data)
        self.storage = {n: self.storage_factory(n, None) for n in self.names}
        self._checked = {n: 0 for n in self.names}  # each node's commit checked up to
        self._complete: set[tuple[int, str]] = set()  # leaders checked for completeness
        self.nodes: dict[str, RaftNode | None] = {n: self._boot(n) for n in self.names}
        self.queue: list[tuple[float, int, str, str, object]] = []
        self._seq = 0
        self.leaders: dict[int, str] = {}  # term -> its leader
        self.isolated: dict[str, float] = {}  # node -> until when its links are cut
        self.proposed: list[bytes] = []
        self.entries_sent: Counter[str] = Counter()  # entries carried to each node
        self.crashes = self.cuts = 0
        self._next_crash = self._draw(self.faults.crash_every_s)
        self._next_cut = self._draw(self.faults.cut_every_s)
        self._restart: dict[str, float] = {}

    def _draw(self, mean: float) -> float:
        return self.now + self.rng.expovariate(1 / mean) if mean else float("inf")

    def _boot(self, name: str) -> RaftNode:
        first = [n for n in self.names if n not in self.joiners]
        return RaftNode(name, first, self.storage[name],
                        random.Random(self.rng.random()), self.election_s, self.heartbeat_s,
                        now=getattr(self, "now", 0.0), pre_vote=self.pre_vote,
                        join=name in self.joiners)

    # -- the network ----------------------------------------------------------------------
    def send(self, src: str, out, healthy: bool = False) -> None:
        f = self.faults
        for dst, msg in out:
            if type(msg) is Append:
                self.entries_sent[dst] += len(msg.entries)
            copies = 1
            if not healthy:
                if self.rng.random() < f.loss:
                    continue
                copies += self.rng.random() < f.duplicate
            for _ in range(copies):
                at = self.now + self.rng.uniform(*f.delay)
                self._seq += 1
                heapq.heappush(self.queue, (at, self._seq, src, dst, msg))

    def cut(self, a: str, b: str) -> bool:
        return (self.isolated.get(a, -1) > self.now) or (self.isolated.get(b, -1) > self.now)

    # -- running ----------------------------------------------------------------------------
    def run(self, until: float, propose_every: float = 0.05, healthy: bool = False) -> None:
        next_propose = self.now + propose_every
        while self.now < until:
            due = [n.next_due() for n in self.nodes.values() if n is not None]
            t = min([until, next_propose, *due, *(self._restart.values()),
                     *([self.queue[0][0]] if self.queue else []),
                     *([] if healthy else [self._next_crash, self._next_cut])])
            self.now = max(self.now, t)
            if not healthy:
                self._chaos()
            for name, at in list(self._restart.items()):
                if at <= self.now:
                    del self._restart[name]
                    self._reboot(name)
            while self.queue and self.queue[0][0] <= self.now:
                _at, _s, src, dst, msg = heapq.heappop(self.queue)
                node = self.nodes.get(dst)
                if node is None or self.cut(src, dst):
                    continue
                try:
                    out = node.step(msg, self.now)
                except StoreCorruptError:  # its store refused them: answered as the
                    out = node.entries_refused(msg)  # broker's group does (raft.group)
                self.send(dst, out, healthy)
                self.check()
            for name, node in self.nodes.items():
                if node is not None and node.next_due() <= self.now:
                    self.send(name, node.tick(self.now), healthy)
                    self.check()
            if self.now >= next_propose:
                next_propose = self.now + propose_every
                self.propose(healthy)
                if self.on_round is not None:
                    self.on_round(self)

    def propose(self, healthy: bool = False) -> None:
        for name, node in self.nodes.items():
            if node is not None and node.role is Role.LEADER:
                data = self.payload(self.storage[name], len(self.proposed))
                early: list = []  # (as the broker's group: in-step followers first)
                try:
                    _first, out = node.propose([data], self.now,
                                               lambda to, msg, e=early: e.append((to, msg)))
                except NotLeader:
                    continue
                self.proposed.append(data)
                self.send(name, early + out, healthy)
                self.check()

    def _chaos(self) -> None:
        f = self.faults
        if self.now >= self._next_crash:
            self._next_crash = self._draw(f.crash_every_s)
            up = [n for n, node in self.nodes.items() if node is not None]
            if len(up) > 1:
                victim = self.rng.choice(up)
                self.nodes[victim] = None  # its memory gone, its storage kept
                self._restart[victim] = self.now + self.rng.uniform(*f.down_s)
                self.crashes += 1
                for name in up:  # some see its port refuse (a link of theirs was up)
                    node = self.nodes[name]
                    if node is not None and self.rng.random() < 0.7:
                        self.send(name, node.leader_gone(victim, self.now))
        if f.wrong_gone and self.rng.random() < f.wrong_gone:  # a report that is not true
            name = self.rng.choice(self.names)
            node = self.nodes[name]
            if node is not None and node.leader:
                self.send(name, node.leader_gone(node.leader, self.now))
        if self.now >= self._next_cut:
            self._next_cut = self._draw(f.cut_every_s)
            self.isolated[self.rng.choice(self.names)] = self.now + self.rng.uniform(*f.cut_s)
            self.cuts += 1

    def heal(self) -> None:
        self.isolated.clear()
        for name in list(self._restart):
            del self._restart[name]
            self._reboot(name)

    def _reboot(self, name: str) -> None:
        self.storage[name] = self.storage_factory(name, self.storage[name])
        self.nodes[name] = self._boot(name)

    # -- the invariants ---------------------------------------------------------------------
    def check(self) -> None:
        for node in self.nodes.values():
            if node is None:
                continue
            if node.role is Role.LEADER:
                other = self.leaders.setdefault(node.term, node.name)
                assert other == node.name, f"two leaders in term {node.term}: {other}, {node.name}"
                if (node.term, node.name) not in self._complete:
                    self._complete.add((node.term, node.name))
                    self._holds_committed(node.name, len(self.committed))
            start = self._checked[node.name] + 1
            storage = self.storage[node.name]
            if hasattr(storage, "publish"):  # a broker's: committed records to its readers
                storage.publish(node.commit)
            for e in _entries(storage, start, node.commit):
                known = self.committed.setdefault(e.index, (e.term, e.data))
                assert known == (e.term, e.data), (
                    f"{node.name} committed {e.index} as {(e.term, e.data)}, once {known}")
            self._checked[node.name] = max(self._checked[node.name], node.commit)

    def _holds_committed(self, name: str, upto: int) -> None:
        log = self.log(name)
        assert len(log) >= upto, f"{name} leads without committed entries past {len(log)}"
        for i in range(1, upto + 1):
            e = log[i - 1]
            assert (e.term, e.data) == self.committed[i], (
                f"{name} holds {(e.term, e.data)} at committed {i}: {self.committed[i]}")

    def check_all(self) -> None:
        """The whole logs: log matching; each live node's committed prefix the same."""
        self.check_log_matching()
        for name, node in self.nodes.items():
            if node is not None:
                self._holds_committed(name, node.commit)

    def check_log_matching(self) -> None:
        logs = [self.log(name) for name in self.names]
        for a in logs:
            for b in logs:
                for i in range(min(len(a), len(b)), 0, -1):
                    if a[i - 1].term == b[i - 1].term:
                        assert a[:i] == b[:i], f"logs agree on {i}'s term, not before it"
                        break

    def log(self, name: str) -> list:
        storage = self.storage[name]
        return _entries(storage, 1, storage.last_index())

    def leader(self) -> RaftNode | None:
        leaders = [n for n in self.nodes.values() if n is not None and n.role is Role.LEADER]
        return max(leaders, key=lambda n: n.term) if leaders else None


def _entries(storage, first: int, last: int) -> list:
    """Entries first..last: a memory log's compacted ones too (the checker sees them all)."""
    if isinstance(storage, MemoryStorage):
        return storage.log[max(first, 1) - 1:last]
    return storage.entries(first, last)
