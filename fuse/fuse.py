"""`Fuse`: isolate slow or failing brokers for a minute, never more than 30 % of them.

The Double-11 talk's four rules: (1) at most 30 % of the brokers are isolated; (2) a
broker answering too slowly is isolated for 1 minute; (3) so is one whose call
throws; (4) when more than 30 % would be isolated, the brokers isolated
earliest take calls again ("overflow").

Slowness is the broker's part of a call's time: the client's own lateness
(`heartbeat` gaps, see `fuse.lateness`) is taken off, the broker's reported
service time is a floor, and a broker is slow only when slow alone (most
other brokers' calls did not age with it; see `fuse.slowness`).

Concurrency: the hot path (`choose`, `begin`, `end`, `report` of a good call)
takes no lock. It reads immutable tuples/frozensets that the locked slow path
replaces whole, draws round-robin positions from an `itertools.count` (atomic
under the GIL) and keeps in-flight calls in a dict (single operations are
atomic). The lock is held only to change isolation state, for microseconds,
and never around the broker call itself (pybreaker holds its lock around it).
Housekeeping (expiry, in-flight judgement, baseline) runs at most every
`tick_s` from whichever thread gets there first, with a non-blocking acquire.

Small clusters: the cap is floor(0.3 x N), which is 0 for N < 4. Such a fuse
records isolations (transitions, snapshot, metrics) but every isolated broker
is overflow and keeps serving: taking one of three brokers out moves half its
load onto each of the other two, which is how one slow broker becomes a slow
cluster on a peak night. Rule 1 is kept as a hard limit.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from fuse.config import FuseConfig
from fuse.errors import FuseError
from fuse.inflight import LEVEL_COUNTS, InflightCalls
from fuse.keeper import Keeper
from fuse.lateness import ClientLateness
from fuse.state import BrokerState, FuseSnapshot, IsolatedBroker
from heatmap.sla import FUSE_CAP_RATIO, FUSE_ISOLATION_S

# begin() returns (call id, broker, start time); end() takes it back.
CallToken = tuple[int, str, float]



class Fuse:
    """Chooses brokers round robin, skipping isolated ones within the cap.

    `Fuse(brokers, isolation_s=60.0, max_isolated_ratio=0.3, slow_s=0.010,
    clock=time.monotonic, *, dry_run=False, seed=None, **tuning)` where
    `tuning` are the other `FuseConfig` fields (slow_factor, jitter_ratio,
    backoff, max_isolation_s, ...). `clock` must be monotonic, in seconds.
    """

    def __init__(
        self,
        brokers: Iterable[str] = (),
        isolation_s: float = FUSE_ISOLATION_S,
        max_isolated_ratio: float = FUSE_CAP_RATIO,
        slow_s: float = 0.010,
        clock: Callable[[], float] = time.monotonic,
        *,
        dry_run: bool = False,
        seed: int | str | None = None,
        colocated: Iterable[str] = (),
        **tuning: float,
    ) -> None:
        if isinstance(brokers, str):
            raise FuseError(f"brokers is a list of names, got the string {brokers!r}")
        try:
            config = FuseConfig(isolation_s=isolation_s, max_isolated_ratio=max_isolated_ratio,
                                slow_s=slow_s, dry_run=dry_run, **tuning)
        except TypeError as exc:
            raise FuseError(f"unknown fuse setting: {exc}") from None
        self.config = config.validate()
        self._clock = clock
        self._late = ClientLateness()
        self._alpha = config.ewma_alpha
        self._states: dict[str, BrokerState] = {}
        self._ids = itertools.count()
        self._rr = itertools.count()
        self._calls = InflightCalls()
        self._fresh = self._calls.fresh  # the hot path's stage
        # Brokers on the client's own host: they compete with it (and each other)
        # for its cores, so a late answer short of hung (10x the line) is that host's
        # noise (single-broker hiccups of up to ~50 ms measured on a 2-core demo host).
        self.colocated = frozenset(colocated)
        # the slow path: isolation state and its changes, under its own lock
        self._k = Keeper(self.config, clock, self._states, self._calls, self._late,
                         self.colocated, seed)
        with self._k.lock:
            for broker in brokers:
                self._k.add_locked(broker)
            self._k.rebuild_locked(self._clock())

    # ---- hot path -------------------------------------------------------

    def choose(self, candidates: Sequence[str] | None = None,
               prefer: str | None = None) -> str:
        """A broker to call: round robin over the usable ones.

        With `candidates` (e.g. the brokers holding the topic, minus the one
        that just failed), round robin over those not excluded (a name the
        fuse does not know counts as healthy); if all of them are excluded,
        the one isolated earliest (rule 4). `prefer`, when it is one of the
        candidates not excluded, is chosen (the round robin does not move).
        """
        k = self._k
        if self._clock() >= k.next_tick:
            k.housekeep(block=False)
        if candidates is None:
            usable = k.usable
            try:
                return usable[next(self._rr) % len(usable)]
            except ZeroDivisionError:
                raise FuseError("the fuse has no brokers to choose from") from None
        excluded = k.excluded
        if prefer is not None and prefer not in excluded and prefer in candidates:
            return prefer
        pool = [b for b in candidates if b not in excluded]
        if pool:
            return pool[next(self._rr) % len(pool)]
        if not candidates:
            raise FuseError("choose() got an empty candidate list")
        return min(candidates, key=k.rank)

    # The methods below are the per-call hot path: the judgement is inlined
    # (no helper call for a healthy call) because a Python call costs ~100 ns.

    def begin(self, broker: str) -> CallToken:
        """A call to `broker` starts now; pass the token to `end`."""
        call_id = next(self._ids)
        start = self._clock()
        self._fresh[call_id] = (broker, start)
        return (call_id, broker, start)

    def end(self, token: CallToken, ok: bool = True, broker_s: float | None = None,
            why: str = "") -> float:
        """The call of `token` returned (`ok=False`: it threw; `why`: what, the evidence
        an error isolation shows the operator). Returns its RT.

        The broker is judged on its part of the RT: the time the client was
        away (see `heartbeat`) is taken off, and `broker_s`, the broker's own
        service time when its answer carries one, is a floor.
        """
        call_id, broker, start = token
        now = self._clock()
        rt = judged = now - start
        late, k = self._late, self._k
        if now > late.due_by or late.gap_end > start:  # the client was away meanwhile
            judged = rt - late.away(start, now)
            if judged < rt and ok:
                k.excused["client-late"] += 1
        if broker_s is not None and judged < broker_s:
            judged = broker_s if broker_s < rt else rt
        # The stage the call is still in says how often housekeeping counted it.
        if self._fresh.pop(call_id, None) is not None:
            counted = 0
        else:
            counted = LEVEL_COUNTS[self._calls.level(call_id)]
        state = self._states.get(broker)
        if state is None or start < state.joined_at:  # unknown, removed or replaced since
            return rt
        if counted >= 3 and state.stuck > 0:
            state.stuck -= 1
        state.ewma_s += ((judged if judged < 1.0 else 1.0) - state.ewma_s) * self._alpha
        if not state.samples:
            state.first_seen = now
        state.samples += 1
        state.seen_at = now
        k.answered += 1
        line = k.threshold
        if ok:
            if judged <= line and not counted:
                if judged > k.aged_s:
                    k.sluggish += 1  # evidence for a neighbour's judgement
                    if judged > state.sluggish_s or now - state.sluggish_at > line:
                        state.sluggish_at, state.sluggish_s = now, judged
                return rt
            k.sluggish += 1
            if counted and judged > state.worst_rt_s:
                state.worst_rt_s = judged  # its real RT, for re-judging (benign race)
            weight = self._weight(judged, line) - counted
            if weight <= 0:
                return rt
            k.offend(state, True, judged, weight)
        else:
            k.offend(state, False, judged, 1, why)
        return rt

    def report(self, broker: str, rt_s: float, ok: bool = True,
               broker_s: float | None = None, why: str = "") -> None:
        """A call to `broker` that took `rt_s` seconds just finished; `ok=False` if it
        threw, `why` what it threw (an isolation's evidence, as `end`'s).

        Report only the broker's faults as failures (timeouts, connection
        errors, broker busy), not the caller's own (a message too large).
        Judged like `end`: client lateness within the call is taken off,
        `broker_s` (the broker's own service time) is a floor. Reports for
        unknown or removed brokers are ignored, and so are calls that started
        before the broker was added (again: a name re-added after a failover).
        """
        try:
            if not rt_s >= 0.0:  # also catches NaN
                raise TypeError
        except TypeError:
            raise FuseError(f"rt_s must be a number >= 0, got {rt_s!r}") from None
        state = self._states.get(broker)
        if state is None or self._clock() - rt_s < state.joined_at:  # (see `end`)
            return
        late = self._late
        if late.last is not None:
            now = self._clock()
            away = late.away(now - rt_s, now)
            if away:
                rt_s -= away
                if ok:
                    self._k.excused["client-late"] += 1
        if broker_s is not None and rt_s < broker_s:
            rt_s = broker_s
        state.ewma_s += ((rt_s if rt_s < 1.0 else 1.0) - state.ewma_s) * self._alpha
        if not state.samples:
            state.first_seen = self._clock()
        state.samples += 1
        line = self._k.threshold
        if ok and rt_s <= line:
            return
        self._k.offend(state, ok, rt_s, self._weight(rt_s, line) if ok else 1, why)

    def _weight(self, rt: float, line: float) -> int:
        """Offences a slow call is worth: past the line, twice it, stuck, hung."""
        cfg = self.config
        return ((rt > line) + (rt > 2.0 * line) + (rt > cfg.stuck_line(line))
                + (rt > cfg.hung_line(line)))

    def heartbeat(self, interval_s: float) -> float:
        """The client that reads the brokers' answers is running now.

        Call it from that thread or event loop on a timer every `interval_s`
        (5-20 ms). A late beat means the client itself was late: calls are
        not held against their brokers for that time. Returns the lateness.
        """
        if not (isinstance(interval_s, int | float) and 0 < interval_s < 1.0):
            raise FuseError(f"interval_s must be in (0, 1) seconds, got {interval_s!r}")
        return self._late.beat(self._clock(), float(interval_s))

    def rest(self) -> None:
        """The client stops its heartbeat until its next call (nothing in flight)."""
        self._late.rest()

    @property
    def calls_in_flight(self) -> int:
        return len(self._calls)

    def abandon(self, token: CallToken) -> None:
        """Forget a call without judging it (e.g. the producer is shutting down)."""
        self._calls.forget(token[0])

    @contextmanager
    def calling(self, broker: str) -> Iterator[CallToken]:
        """`with fuse.calling(b): send(...)`: an exception marks the call failed."""
        token = self.begin(broker)
        try:
            yield token
        except Exception as exc:
            self.end(token, ok=False, why=f"{type(exc).__name__}: {exc}")
            raise
        except BaseException:
            self.abandon(token)
            raise
        self.end(token, ok=True)

    # ---- membership -------------------------------------------------------

    def add_broker(self, broker: str) -> None:
        """Start using `broker` (no-op if known); the cap is recomputed. Calls that
        started before this are not its own (a name added back after a failover)."""
        with self._k.lock:
            if self._k.add_locked(broker, joined_at=self._clock()):
                self._k.rebuild_locked(self._clock())

    def remove_broker(self, broker: str) -> None:
        """Stop using `broker` and drop its state (no-op if unknown)."""
        with self._k.lock:
            self._k.remove_locked(broker)

    def on_isolate(self, hook: Callable[[str, str, str], None]) -> None:
        """`hook(broker, reason, detail)` when a broker is isolated (not in a dry run):
        reason "slow" or "error", detail the evidence (the call's wait against the line,
        or its error). Called under the fuse's lock: it must only hand the news on."""
        with self._k.lock:
            self._k.on_isolate.append(hook)

    def release_if(self, broker: str, why: str, reason: str) -> bool:
        """End `broker`'s isolation before its minute is out, if every call held against it
        this time failed with `why` and the caller knows that cause is gone (a producer
        whose group has a slave in sync again: `why` its one-copy answers, reason
        "in-sync"). An isolation for slowness or for any other error runs its minute.
        Isolated or not, a call begun before now that answers `why` later is not held
        against the broker. True if it was released."""
        with self._k.lock:
            return self._k.release_if_locked(broker, why, reason)

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(self._k.order)

    def tick(self) -> None:
        """Expire isolations, judge calls still in flight, refresh the baseline.

        `choose` does this by itself every `tick_s`; call it from a timer if
        the producer may sit idle while calls are in flight.
        """
        self._k.housekeep(block=True)

    check_inflight = tick

    # ---- reading ------------------------------------------------------------

    def snapshot(self, transitions: bool = True) -> FuseSnapshot:
        """The state now (after housekeeping), with the last 100 transitions."""
        k = self._k
        k.housekeep(block=True)
        with k.lock:
            now = self._clock()
            entries = k.list
            isolated = tuple(
                IsolatedBroker(st.name, st.reason, st.since, st.until, max(0.0, st.until - now),
                               st.overflow, st.offences, st.repeats, st.cause)
                for st in entries.entries
            )
            return FuseSnapshot(
                time=now,
                brokers=tuple(k.order),
                cap=k.cap,
                dry_run=self.config.dry_run,
                isolated=isolated,
                excluded=k.excluded,
                would_exclude=k.would_exclude,
                overflow=k.overflow,
                slow_threshold_s=k.threshold,
                baseline_s=k.judge.baseline_s,
                cluster_slow=k.judge.cluster_slow(now, len(self._states)),
                inflight=len(self._calls),
                isolations_total=dict(entries.isolations_total),
                transitions_total=dict(entries.transitions_total),
                overflow_total=entries.overflow_total,
                transitions=tuple(entries.transitions) if transitions else (),
                isolations_by_broker={st.name: st.isolations for st in self._states.values()
                                      if st.isolations},
                excused_total=dict(k.excused),
                client=self._late.figures(now) if self._late.beats else None,
                colocated=self.colocated,
            )

    @property
    def excluded(self) -> frozenset[str]:
        """What `choose` skips right now (no housekeeping; cheap)."""
        return self._k.excluded
