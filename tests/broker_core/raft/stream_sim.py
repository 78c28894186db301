"""A seeded virtual network of groups whose log is a byte stream: Raft's elections
(raft.stream_election) beside a model of the master's replication stream (ha.master's
welcome and acks, ha.slave's hello, truncation and fencing, over ha.epochs), with
election messages lost, delayed, duplicated and reordered, replication links cut, and
nodes crashed (everything lost but their log, epochs and vote) and restarted.

A log is a list of units, each (term, serial): a unit is a byte, written once by the
leader of its term. The invariants, checked as it runs (`StreamSim.check`):

- election safety: at most one leader a term;
- log matching on (term, offset): two logs whose units at an offset have one term
  hold the same units up to it;
- state machine safety: what any leader counted committed, and what any follower
  published, is one prefix;
- leader completeness: a leader holds everything committed before it.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from broker_core.ha.epochs import EpochHistory, consistent_end
from broker_core.raft.roles import Role
from broker_core.raft.stream_election import StreamElection


@dataclass
class Faults:
    loss: float = 0.0
    duplicate: float = 0.0
    delay: tuple[float, float] = (0.001, 0.01)  # uniform: reordering comes with it
    crash_every_s: float = 0.0  # mean time between crashes (0: none)
    down_s: tuple[float, float] = (0.5, 3.0)
    cut_every_s: float = 0.0  # mean time between link cuts (a partition of one member)
    cut_s: tuple[float, float] = (0.5, 4.0)
    wrong_gone: float = 0.0  # the chance a step tells a member its live leader is gone


@dataclass
class Disk:
    """What a node keeps across a crash."""

    units: list = field(default_factory=list)
    history: EpochHistory = field(default_factory=lambda: EpochHistory([]))
    term: int = 0
    voted_for: str | None = None

    def save_vote(self, term: int, voted_for: str | None) -> None:
        assert term >= self.term, "terms never go back"
        self.term, self.voted_for = term, voted_for

    def end(self) -> int:
        return len(self.units)

    def last_term(self) -> int:
        return self.history.term_of_last_byte(len(self.units))


@dataclass
class Node:
    disk: Disk
    election: StreamElection
    following: tuple[str, int] | None = None  # (leader, term) whose stream it reads
    conn: int = 0  # its link to that leader (0: none)
    welcomed: bool = False
    published: int = 0  # a follower's: committed units it shows readers
    links: dict = field(default_factory=dict)  # a leader's: follower -> [conn, pos, acked]
    commit: int = 0  # a leader's
    led: int = 0  # the term it began as master
    applied: tuple | None = None  # the election's state its replication follows
    applying: bool = False


class StreamSim:
    def __init__(self, names: list[str], seed: int, faults: Faults | None = None,
                 election_s: float = 0.3, heartbeat_s: float = 0.05, chunk: int = 3,
                 apply_lag: float = 0.03, transfer_every_s: float = 0.0) -> None:
        self.names, self.seed, self.chunk = names, seed, chunk
        self.apply_lag = apply_lag
        self.transfer_every_s = transfer_every_s  # the chance, at each step, of a transfer
        self.faults = faults or Faults()
        self.election_s, self.heartbeat_s = election_s, heartbeat_s
        self.rng = random.Random(seed)
        self.now = 0.0
        self.disks = {n: Disk() for n in names}
        self.nodes: dict[str, Node | None] = {n: self._boot(n) for n in names}
        self.queue: list = []
        self._seq = 0
        self._conns = 0
        self._fifo: dict[int, float] = {}  # a link's last delivery: in order, as TCP
        self.leaders: dict[int, str] = {}
        self.committed: list = []
        self._complete: set[tuple[int, str]] = set()
        self.isolated: dict[str, float] = {}
        self._restart: dict[str, float] = {}
        self.serial = 0
        self.crashes = self.cuts = 0
        self._next_crash = self._draw(self.faults.crash_every_s)
        self._next_cut = self._draw(self.faults.cut_every_s)

    def _draw(self, mean: float) -> float:
        return self.now + self.rng.expovariate(1 / mean) if mean else float("inf")

    def _boot(self, name: str) -> Node:
        disk = self.disks[name]
        e = StreamElection(name, self.names, disk, disk, random.Random(self.rng.random()),
                           self.election_s, self.heartbeat_s, now=getattr(self, "now", 0.0))
        return Node(disk, e)

    def cut(self, a: str, b: str) -> bool:
        return self.isolated.get(a, -1) > self.now or self.isolated.get(b, -1) > self.now

    # -- the network ----------------------------------------------------------------------
    def send(self, src: str, out, healthy: bool) -> None:
        """Election messages: lost, duplicated, reordered."""
        f = self.faults
        for dst, msg in out:
            copies = 1
            if not healthy:
                if self.rng.random() < f.loss:
                    continue
                copies += self.rng.random() < f.duplicate
            for _ in range(copies):
                self._push(self.now + self.rng.uniform(*f.delay), src, dst, ("raft", msg))

    def stream(self, src: str, dst: str, conn: int, what: tuple) -> None:
        """Replication frames: in order on their link, gone with it."""
        at = max(self.now + self.rng.uniform(*self.faults.delay), self._fifo.get(conn, 0.0))
        self._fifo[conn] = at
        self._push(at, src, dst, ("ha", conn, *what))

    def _push(self, at: float, src: str, dst: str, item: tuple) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (at, self._seq, src, dst, item))

    # -- running ----------------------------------------------------------------------------
    def run(self, until: float, propose_every: float = 0.02, healthy: bool = False) -> None:
        next_propose = self.now + propose_every
        while self.now < until:
            due = [n.election.next_due() for n in self.nodes.values() if n is not None]
            t = min([until, next_propose, *due, *self._restart.values(),
                     *([self.queue[0][0]] if self.queue else []),
                     *([] if healthy else [self._next_crash, self._next_cut])])
            self.now = max(self.now, t)
            if not healthy:
                self._chaos()
            for name, at in list(self._restart.items()):
                if at <= self.now:
                    del self._restart[name]
                    self.nodes[name] = self._boot(name)
            while self.queue and self.queue[0][0] <= self.now:
                _at, _s, src, dst, item = heapq.heappop(self.queue)
                node = self.nodes.get(dst)
                if node is None or (src != dst and self.cut(src, dst)):
                    continue
                if item[0] == "raft":
                    self.send(dst, node.election.step(item[1], self.now), healthy)
                elif item[0] == "apply":
                    self._apply(dst, node)
                else:
                    self._on_frame(dst, node, src, item[1], item[2:])
                self._settle(dst, healthy)
            for name, node in self.nodes.items():
                if node is not None and node.election.next_due() <= self.now:
                    self.send(name, node.election.tick(self.now), healthy)
                    self._settle(name, healthy)
            if self.now >= next_propose:
                next_propose = self.now + propose_every
                self.propose()

    def propose(self) -> None:
        for name, node in self.nodes.items():
            if node is not None and node.election.role is Role.LEADER and node.led and \
                    node.election.transfer_to is None:
                self._write(name, node)

    def _write(self, name: str, node: Node) -> None:
        self.serial += 1
        node.disk.units.append((node.led, self.serial))
        self._push_links(name, node)
        self._count(name, node)

    # -- a member's role: the replication that goes with it ---------------------------------
    def _settle(self, name: str, _healthy: bool) -> None:
        """The replication side follows the election's state a moment later (a broker's
        group changes its master and slave on the loop, after the message that moved
        the election): meanwhile the old links run, and only fencing by term holds."""
        self.check()
        node = self.nodes[name]
        e = node.election
        want = ("lead", e.term) if e.role is Role.LEADER else (
            ("follow", e.leader, e.term) if e.leader else None)
        if want != node.applied and not node.applying:
            node.applying = True
            self._push(self.now + self.rng.uniform(0, self.apply_lag), name, name, ("apply",))
        elif want == node.applied and node.following and not node.conn:
            self._hello(name, node)  # a link that ended: dialled again

    def _apply(self, name: str, node: Node) -> None:
        node.applying = False
        e = node.election
        if e.role is Role.LEADER:
            node.applied = ("lead", e.term)
            if node.led != e.term:  # begins as master
                self._unfollow(node)
                node.led = e.term
                self._close_links(name, node)
                node.commit = 0
                node.disk.history.begin(e.term, node.disk.end())
                # (its first bytes come with the next proposal: meanwhile its followers
                # may take and acknowledge the tail of older terms it holds)
            return
        node.applied = ("follow", e.leader, e.term) if e.leader else None
        if node.led:
            node.led = 0
            self._close_links(name, node)
        want = (e.leader, e.term) if e.leader else None
        if want != node.following:
            self._unfollow(node)
            node.following = want
        if node.following and not node.conn:
            self._hello(name, node)

    def _close_links(self, name: str, node: Node) -> None:
        for follower, (conn, _pos, _acked) in node.links.items():
            self.stream(name, follower, conn, ("closed",))
        node.links.clear()

    def _unfollow(self, node: Node) -> None:
        node.following, node.conn, node.welcomed = None, 0, False

    def _hello(self, name: str, node: Node) -> None:
        self._conns += 1
        node.conn, node.welcomed = self._conns, False
        d = node.disk
        self.stream(name, node.following[0], node.conn,
                    ("hello", node.election.term, d.end(), EpochHistory(list(d.history.entries))))

    def _push_links(self, name: str, node: Node) -> None:
        end = node.disk.end()
        for follower, link in node.links.items():
            conn, pos, _acked = link
            while pos < end:  # frames of at most `chunk` units (ha.wire.CHUNK bytes)
                upto = min(end, pos + self.chunk)
                self.stream(name, follower, conn,
                            ("data", pos, list(node.disk.units[pos:upto]), node.led, node.commit))
                pos = link[1] = upto

    def _count(self, name: str, node: Node) -> None:
        """The offset a majority holds, once it holds bytes of this leader's term."""
        e = node.election
        marks = sorted([node.disk.end(), *(lk[2] for lk in node.links.values())], reverse=True)
        marks += [0] * (len(self.names) - len(marks))
        n = marks[e.quorum - 1]
        start = node.disk.history.entries[-1][1]
        if n > start and n > node.commit:
            node.commit = e.commit = n
            self._committed(name, node.disk.units[:n])

    def _on_frame(self, name: str, node: Node, src: str, conn: int, what: tuple) -> None:
        kind, *rest = what
        d = node.disk
        if kind == "hello":  # at the leader (ha.master.welcome)
            known, end, history = rest
            if not node.led or known > node.led:
                return  # refused: the follower retries on its next link
            agreed = consistent_end(history, end, d.history, d.end()) if end else 0
            if agreed < end:
                self.stream(name, src, conn, ("truncate", agreed))
                return
            node.links[src] = [conn, end, end]
            self.stream(name, src, conn, ("welcome", node.led, end,
                                          EpochHistory(list(d.history.entries))))
            self._push_links(name, node)
            return
        if kind == "ack":
            link = node.links.get(src)
            if node.led and link is not None and link[0] == conn:
                link[2] = max(link[2], rest[0])
                self._count(name, node)
            return
        if conn != node.conn:
            return  # a link it no longer reads
        known = node.election.term
        if kind == "closed":
            node.conn = 0
        elif kind == "truncate":
            assert rest[0] >= node.published, f"{name} told to cut published units"
            del d.units[rest[0]:]
            node.conn = 0  # (and links again)
        elif kind == "welcome":
            epoch, offset, history = rest
            if epoch < known or offset != d.end():
                node.conn = 0
                return
            d.history = history
            node.welcomed = True
        elif kind == "data" and node.welcomed:
            at, units, epoch, commit = rest
            if epoch < known or at != d.end():
                node.conn = 0
                return
            d.units.extend(units)
            self.stream(name, src, conn, ("ack", d.end()))
            upto = min(commit, d.end())
            if upto > node.published:
                node.published = upto
                self._committed(name, d.units[:upto])

    # -- faults -----------------------------------------------------------------------------
    def _chaos(self) -> None:
        f = self.faults
        if self.now >= self._next_crash:
            self._next_crash = self._draw(f.crash_every_s)
            up = [n for n, node in self.nodes.items() if node is not None]
            if len(up) > 1:
                victim = self.rng.choice(up)
                self.nodes[victim] = None
                self._broken(victim)
                self._restart[victim] = self.now + self.rng.uniform(*f.down_s)
                self.crashes += 1
        if self.transfer_every_s and self.rng.random() < self.transfer_every_s:
            node = self.leader()  # an operator's transfer-leader, a fuse's step-aside
            if node is not None and node.election.transfer_to is None:
                to = self.rng.choice(node.election.peers)
                self.send(node.election.name, node.election.transfer(to, self.now), False)
        if self.now >= self._next_cut:
            self._next_cut = self._draw(f.cut_every_s)
            victim = self.rng.choice(self.names)
            self.isolated[victim] = self.now + self.rng.uniform(*f.cut_s)
            self.cuts += 1
            self._broken(victim)

    def _broken(self, victim: str) -> None:
        """A node crashed or cut off: the links through it break at both ends."""
        for name, node in self.nodes.items():
            if node is None:
                continue
            if name == victim or (node.following and node.following[0] == victim):
                node.conn = 0
            for follower in [p for p in node.links if victim in (p, name)]:
                del node.links[follower]

    def heal(self) -> None:
        self.isolated.clear()
        for name in list(self._restart):
            del self._restart[name]
            self.nodes[name] = self._boot(name)

    # -- the invariants ---------------------------------------------------------------------
    def _committed(self, name: str, prefix: list) -> None:
        common = min(len(prefix), len(self.committed))
        assert prefix[:common] == self.committed[:common], \
            f"seed {self.seed}: {name} committed a prefix that differs from one before"
        if len(prefix) > len(self.committed):
            self.committed = list(prefix)

    def check(self) -> None:
        for node in self.nodes.values():
            if node is None or node.election.role is not Role.LEADER:
                continue
            e = node.election
            other = self.leaders.setdefault(e.term, e.name)
            assert other == e.name, f"seed {self.seed}: two leaders in term {e.term}"
            if (e.term, e.name) not in self._complete:
                self._complete.add((e.term, e.name))
                units = node.disk.units
                assert units[:len(self.committed)] == self.committed, \
                    f"seed {self.seed}: {e.name} leads term {e.term} without all committed"

    def check_log_matching(self) -> None:
        logs = [d.units for d in self.disks.values()]
        for a in logs:
            for b in logs:
                for p in range(min(len(a), len(b)) - 1, -1, -1):
                    if a[p][0] == b[p][0]:
                        assert a[:p + 1] == b[:p + 1], \
                            f"seed {self.seed}: logs agree on offset {p}'s term, not before"
                        break

    def leader(self) -> Node | None:
        leaders = [n for n in self.nodes.values()
                   if n is not None and n.election.role is Role.LEADER]
        return max(leaders, key=lambda n: n.election.term) if leaders else None
