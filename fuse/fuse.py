"""`Fuse`: isolate slow or failing brokers for a minute, never more than 30 % of them.

Seed 000's four rules: (1) at most 30 % of the brokers are isolated; (2) a
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
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from fuse.config import FuseConfig
from fuse.crowd import CrowdWindow
from fuse.errors import FuseError
from fuse.inflight import LEVEL_COUNTS, InflightCalls
from fuse.isolation import IsolationList
from fuse.lateness import ClientLateness
from fuse.slowness import SHARED, UNSURE, SlowJudge, slow_alone
from fuse.state import BrokerState, FuseSnapshot, IsolatedBroker

# begin() returns (call id, broker, start time); end() takes it back.
CallToken = tuple[int, str, float]

REJUDGE_MARGIN = 1.2


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
        isolation_s: float = 60.0,
        max_isolated_ratio: float = 0.3,
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
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._judge = SlowJudge(config)
        self._late = ClientLateness()
        self._crowd = CrowdWindow()
        self._answered = self._sluggish = 0  # since the last housekeeping, for the crowd
        self._excused = {"client-late": 0, "aged-together": 0}
        self._threshold = config.slow_s
        self._aged_s = config.slow_s * config.aged_fraction
        self._tick_s = config.housekeeping_s
        self._alpha = config.ewma_alpha
        # Brokers on the client's own host: they compete with it (and each other)
        # for its cores, so a late answer short of hung (10x the line) is that host's
        # noise (single-broker hiccups of up to ~50 ms measured on a 2-core demo host).
        self.colocated = frozenset(colocated)
        self._states: dict[str, BrokerState] = {}
        self._order: list[str] = []
        self._list = IsolationList()
        self._cap = 0
        self._usable: tuple[str, ...] = ()
        self._excluded: frozenset[str] = frozenset()
        self._would_exclude: frozenset[str] = frozenset()
        self._overflow: frozenset[str] = frozenset()
        self._rr = itertools.count()
        self._ids = itertools.count()
        self._calls = InflightCalls()
        self._fresh = self._calls.fresh  # the hot path's stage
        self._next_tick = float("-inf")
        self._next_baseline = float("-inf")
        with self._lock:
            for broker in brokers:
                self._add_locked(broker)
            self._rebuild_locked(self._clock())

    # ---- hot path -------------------------------------------------------

    def choose(self, candidates: Sequence[str] | None = None) -> str:
        """A broker to call: round robin over the usable ones.

        With `candidates` (e.g. the brokers holding the topic, minus the one
        that just failed), round robin over those not excluded (a name the
        fuse does not know counts as healthy); if all of them are excluded,
        the one isolated earliest (rule 4).
        """
        if self._clock() >= self._next_tick:
            self._housekeep(block=False)
        if candidates is None:
            usable = self._usable
            try:
                return usable[next(self._rr) % len(usable)]
            except ZeroDivisionError:
                raise FuseError("the fuse has no brokers to choose from") from None
        excluded = self._excluded
        pool = [b for b in candidates if b not in excluded]
        if pool:
            return pool[next(self._rr) % len(pool)]
        if not candidates:
            raise FuseError("choose() got an empty candidate list")
        return min(candidates, key=self._isolation_rank)

    # The methods below are the per-call hot path: the judgement is inlined
    # (no helper call for a healthy call) because a Python call costs ~100 ns.

    def begin(self, broker: str) -> CallToken:
        """A call to `broker` starts now; pass the token to `end`."""
        call_id = next(self._ids)
        start = self._clock()
        self._fresh[call_id] = (broker, start)
        return (call_id, broker, start)

    def end(self, token: CallToken, ok: bool = True, broker_s: float | None = None) -> float:
        """The call of `token` returned (`ok=False`: it threw). Returns its RT.

        The broker is judged on its part of the RT: the time the client was
        away (see `heartbeat`) is taken off, and `broker_s`, the broker's own
        service time when its answer carries one, is a floor.
        """
        call_id, broker, start = token
        now = self._clock()
        rt = judged = now - start
        late = self._late
        if now > late.due_by or late.gap_end > start:  # the client was away meanwhile
            judged = rt - late.away(start, now)
            if judged < rt and ok:
                self._excused["client-late"] += 1
        if broker_s is not None and judged < broker_s:
            judged = broker_s if broker_s < rt else rt
        # The stage the call is still in says how often housekeeping counted it.
        if self._fresh.pop(call_id, None) is not None:
            counted = 0
        else:
            counted = LEVEL_COUNTS[self._calls.level(call_id)]
        state = self._states.get(broker)
        if state is None:  # unknown or removed meanwhile
            return rt
        if counted >= 3 and state.stuck > 0:
            state.stuck -= 1
        state.ewma_s += ((judged if judged < 1.0 else 1.0) - state.ewma_s) * self._alpha
        if not state.samples:
            state.first_seen = now
        state.samples += 1
        state.seen_at = now
        self._answered += 1
        line = self._threshold
        if ok:
            if judged <= line and not counted:
                if judged > self._aged_s:
                    self._sluggish += 1  # evidence for a neighbour's judgement
                    if judged > state.sluggish_s or now - state.sluggish_at > line:
                        state.sluggish_at, state.sluggish_s = now, judged
                return rt
            self._sluggish += 1
            if counted and judged > state.worst_rt_s:
                state.worst_rt_s = judged  # its real RT, for re-judging (benign race)
            weight = self._weight(judged, line) - counted
            if weight <= 0:
                return rt
            self._offend(state, True, judged, weight)
        else:
            self._offend(state, False, judged, 1)
        return rt

    def report(self, broker: str, rt_s: float, ok: bool = True,
               broker_s: float | None = None) -> None:
        """A call to `broker` that took `rt_s` seconds just finished; `ok=False` if it threw.

        Report only the broker's faults as failures (timeouts, connection
        errors, broker busy), not the caller's own (a message too large).
        Judged like `end`: client lateness within the call is taken off,
        `broker_s` (the broker's own service time) is a floor. Reports for
        unknown or removed brokers are ignored.
        """
        try:
            if not rt_s >= 0.0:  # also catches NaN
                raise TypeError
        except TypeError:
            raise FuseError(f"rt_s must be a number >= 0, got {rt_s!r}") from None
        state = self._states.get(broker)
        if state is None:
            return
        late = self._late
        if late.last is not None:
            now = self._clock()
            away = late.away(now - rt_s, now)
            if away:
                rt_s -= away
                if ok:
                    self._excused["client-late"] += 1
        if broker_s is not None and rt_s < broker_s:
            rt_s = broker_s
        state.ewma_s += ((rt_s if rt_s < 1.0 else 1.0) - state.ewma_s) * self._alpha
        if not state.samples:
            state.first_seen = self._clock()
        state.samples += 1
        line = self._threshold
        if ok and rt_s <= line:
            return
        self._offend(state, ok, rt_s, self._weight(rt_s, line) if ok else 1)

    def _weight(self, rt: float, line: float) -> int:
        """Offences a slow call is worth: past the line, twice it, stuck, hung."""
        cfg = self.config
        return ((rt > line) + (rt > 2.0 * line) + (rt > cfg.stuck_factor * line)
                + (rt > cfg.hung_factor * line))

    def heartbeat(self, interval_s: float) -> float:
        """The client that reads the brokers' answers is running now.

        Call it from that thread or event loop on a timer every `interval_s`
        (5-20 ms). A late beat means the client itself was late: calls are
        not held against their brokers for that time. Returns the lateness.
        """
        if not (isinstance(interval_s, int | float) and 0 < interval_s < 1.0):
            raise FuseError(f"interval_s must be in (0, 1) seconds, got {interval_s!r}")
        return self._late.beat(self._clock(), float(interval_s))

    def _offend(self, state: BrokerState, ok: bool, rt: float, counts: int) -> None:
        with self._lock:
            if self._states.get(state.name) is state:
                self._offend_locked(state, "slow" if ok else "error", self._clock(), rt, counts)

    def abandon(self, token: CallToken) -> None:
        """Forget a call without judging it (e.g. the producer is shutting down)."""
        self._calls.forget(token[0])

    @contextmanager
    def calling(self, broker: str) -> Iterator[CallToken]:
        """`with fuse.calling(b): send(...)`: an exception marks the call failed."""
        token = self.begin(broker)
        try:
            yield token
        except Exception:
            self.end(token, ok=False)
            raise
        except BaseException:
            self.abandon(token)
            raise
        self.end(token, ok=True)

    # ---- housekeeping -----------------------------------------------------

    def tick(self) -> None:
        """Expire isolations, judge calls still in flight, refresh the baseline.

        `choose` does this by itself every `tick_s`; call it from a timer if
        the producer may sit idle while calls are in flight.
        """
        self._housekeep(block=True)

    check_inflight = tick

    def _housekeep(self, block: bool) -> None:
        if not self._lock.acquire(blocking=block):
            return  # another thread is doing it right now
        try:
            now = self._clock()
            self._next_tick = now + self._tick_s
            changed = self._expire_locked(now)
            answered, sluggish = self._answered, self._sluggish
            self._answered -= answered  # (an increment racing this is kept for next time)
            self._sluggish -= sluggish
            self._crowd.add(now, answered, sluggish)
            self._crowd.fold(now)
            if now >= self._next_baseline:
                self._next_baseline = now + self.config.baseline_interval_s
                self._threshold = self._judge.refresh(self._states.values())
                self._aged_s = self._threshold * self.config.aged_fraction
                changed = self._rejudge_locked(now) or changed
            # A call in flight counts once past the line, once more past twice it
            # and once more when stuck, in time the client was watching.
            line = self._threshold
            lines = (line, 2.0 * line, self.config.stuck_factor * line,
                     self.config.hung_factor * line)
            cut = self._late.cutoff if self._late.active else (lambda t, d: t - d)
            stages = self._calls.climb(tuple(cut(now, d) for d in lines))
            if any(stages):
                self._judge_overdue_locked(now, *stages)
            if changed:
                self._rebuild_locked(now)
        finally:
            self._lock.release()

    def _judge_overdue_locked(self, now: float, past_line: dict, past_twice: dict,
                              stuck: dict, hung: dict) -> None:
        """Offences for calls overdue in flight, unless most brokers aged together:
        then the client (or the whole cluster) is late and nobody is isolated.
        Each is judged against the brokers serving before this batch."""
        stages = (past_line, past_twice, stuck, hung)
        serving = self._usable
        overdue = dict.fromkeys([*past_line, *past_twice, *stuck, *hung])  # ordered
        for broker, (calls, _start) in stuck.items():
            state = self._states.get(broker)
            if state is not None:
                state.stuck += calls
        for broker in overdue:
            self._judge.mark_slow(broker, now)
        if len(overdue) > 1 and self._judge.cluster_slow(now, len(self._states)):
            if not stuck and not hung:  # stuck calls are judged one by one (slow alone?)
                self._excused["aged-together"] += sum(
                    st.get(b, (0, 0))[0] for st in stages for b in overdue)
                self._release_cluster_slow_locked(now)
                return
        for broker in overdue:
            state = self._states.get(broker)
            if state is None:
                continue
            found = [st[broker] for st in stages if broker in st]
            start = min(oldest for _calls, oldest in found)
            waited = now - start - (self._late.away(start, now) if self._late.active else 0.0)
            self._offend_locked(state, "slow", now, waited, sum(c for c, _ in found), serving)

    def _rejudge_locked(self, now: float) -> bool:
        """Release slowness isolations the current line no longer calls slow.

        The baseline lags a cluster-wide slowdown by a few hundred ms; brokers
        isolated in that gap for calls that are now ordinary come back, unless
        a call to them is still stuck.
        """
        line = self._threshold / REJUDGE_MARGIN  # margin: the line wobbles with the baseline
        undo = [st for st in self._list.entries
                if st.episode_errors == 0 and st.worst_rt_s < line and not st.stuck]
        for state in undo:
            self._release_locked(state, now, "rejudged")
        return bool(undo)

    def _expire_locked(self, now: float) -> bool:
        expired = [st for st in self._list.entries if st.until <= now]
        for state in expired:
            self._release_locked(state, now, "expired")
        return bool(expired)

    # ---- state changes (lock held) ---------------------------------------

    def _offend_locked(self, state: BrokerState, reason: str, now: float, rt: float,
                       calls: int = 1, serving: tuple[str, ...] | None = None) -> None:
        cfg = self.config
        if reason == "slow" and not self._slow_enough_locked(state, now, rt, calls, serving):
            return
        jitter = 1.0 + self._rng.random() * cfg.jitter_ratio
        state.reason = reason
        state.last_offence = now
        error = reason == "error"
        if state.isolated:  # offending again: the minute restarts from now
            state.offences += 1
            state.episode_errors += error
            if not error:
                state.worst_rt_s = max(state.worst_rt_s, rt)
            state.until = max(state.until, now + state.duration_s * jitter)
            return
        repeat = state.released_at is not None and now - state.released_at <= cfg.isolation_s
        state.repeats = state.repeats + 1 if repeat else 0
        state.duration_s = min(cfg.isolation_s * cfg.backoff**state.repeats, cfg.max_isolation_s)
        state.offences = 1
        state.episode_errors = int(error)
        state.worst_rt_s = 0.0 if error else rt
        state.since = now
        state.until = now + state.duration_s * jitter
        state.isolations += 1
        self._list.add(state, now, reason)
        self._rebuild_locked(now)

    def _slow_enough_locked(self, state: BrokerState, now: float, rt: float, calls: int,
                            serving: tuple[str, ...] | None) -> bool:
        """Does a slow call (or `calls` counts of one) make `state` slow? The same test
        isolates a broker and keeps an isolated one (serving as overflow) isolated."""
        cfg = self.config
        if state.samples < cfg.warmup_calls or now - state.first_seen < cfg.warmup_s:
            return False  # its first calls carry the connect and a cold broker's start
        stuck = rt > cfg.stuck_factor * self._threshold
        if self._judge.note_slow(state.name, now, len(self._states)) and not stuck:
            self._release_cluster_slow_locked(now)
            return False
        if not state.isolated:  # a suspect until slow_calls within slow_window_s
            if now - state.suspect_since > cfg.slow_window_s:
                state.suspect_since, state.suspect_calls = now, 0
            state.suspect_calls += calls
            if state.suspect_calls < cfg.slow_calls:
                return False
        if state.name in self.colocated and rt <= cfg.hung_factor * self._threshold:
            return False  # a suspect until a call hangs: see `colocated`
        verdict = slow_alone(state.name, rt, serving or self._usable, self._states,
                             self._aged_before, self._crowd, now, self._threshold, cfg)
        if verdict == UNSURE:
            return False  # still a suspect: the next, stronger evidence decides
        state.suspect_since, state.suspect_calls = float("-inf"), 0
        if verdict == SHARED:
            self._excused["aged-together"] += calls
            return False
        return True

    def _aged_before(self, waited_s: float) -> dict[str, int]:
        """Calls in flight per broker that have waited `waited_s` of watched time."""
        now = self._clock()
        cut = self._late.cutoff(now, waited_s) if self._late.active else now - waited_s
        return self._calls.started_before(cut)

    def _release_cluster_slow_locked(self, now: float) -> None:
        """A cluster-wide slowdown: undo slowness isolations of the last window
        (not of a broker with a call stuck, now or in this isolation: a call 40x
        the baseline is not the cluster's slowness)."""
        horizon = now - self.config.cluster_window_s
        stuck_s = self.config.stuck_factor * self._threshold
        undo = [st for st in self._list.entries if st.episode_errors == 0 and
                st.since >= horizon and not st.stuck and st.worst_rt_s <= stuck_s]
        for state in undo:
            self._release_locked(state, now, "cluster-slow")
        if undo:
            self._rebuild_locked(now)

    def _release_locked(self, state: BrokerState, now: float, reason: str) -> None:
        self._list.release(state, now, reason)

    def _rebuild_locked(self, now: float) -> None:
        """Split the isolation list at the cap and republish what `choose` reads."""
        self._cap = self.config.cap(len(self._states))
        would, self._overflow = self._list.split(self._cap, now)
        self._would_exclude = would
        self._excluded = frozenset() if self.config.dry_run else would
        self._usable = tuple(b for b in self._order if b not in self._excluded)

    def _isolation_rank(self, broker: str) -> float:
        state = self._states.get(broker)
        return state.since if state is not None and state.isolated else float("-inf")

    # ---- membership -------------------------------------------------------

    def add_broker(self, broker: str) -> None:
        """Start using `broker` (no-op if known); the cap is recomputed."""
        with self._lock:
            if self._add_locked(broker):
                self._rebuild_locked(self._clock())

    def _add_locked(self, broker: str) -> bool:
        if not isinstance(broker, str) or not broker:
            raise FuseError(f"a broker is a non-empty string, got {broker!r}")
        if broker in self._states:
            return False
        self._states[broker] = BrokerState(broker)
        self._order.append(broker)
        return True

    def remove_broker(self, broker: str) -> None:
        """Stop using `broker` and drop its state (no-op if unknown)."""
        with self._lock:
            state = self._states.pop(broker, None)
            if state is None:
                return
            self._order.remove(broker)
            self._judge.forget(broker)
            now = self._clock()
            if state.isolated:
                self._release_locked(state, now, "removed")
            self._rebuild_locked(now)

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(self._order)

    # ---- reading ------------------------------------------------------------

    def snapshot(self, transitions: bool = True) -> FuseSnapshot:
        """The state now (after housekeeping), with the last 100 transitions."""
        self._housekeep(block=True)
        with self._lock:
            now = self._clock()
            isolated = tuple(
                IsolatedBroker(st.name, st.reason, st.since, st.until, max(0.0, st.until - now),
                               st.overflow, st.offences, st.repeats)
                for st in self._list.entries
            )
            return FuseSnapshot(
                time=now,
                brokers=tuple(self._order),
                cap=self._cap,
                dry_run=self.config.dry_run,
                isolated=isolated,
                excluded=self._excluded,
                would_exclude=self._would_exclude,
                overflow=self._overflow,
                slow_threshold_s=self._threshold,
                baseline_s=self._judge.baseline_s,
                cluster_slow=self._judge.cluster_slow(now, len(self._states)),
                inflight=len(self._calls),
                isolations_total=dict(self._list.isolations_total),
                transitions_total=dict(self._list.transitions_total),
                overflow_total=self._list.overflow_total,
                transitions=tuple(self._list.transitions) if transitions else (),
                isolations_by_broker={st.name: st.isolations for st in self._states.values()
                                      if st.isolations},
                excused_total=dict(self._excused),
                client=self._late.figures(now) if self._late.active else None,
                colocated=self.colocated,
            )

    @property
    def excluded(self) -> frozenset[str]:
        """What `choose` skips right now (no housekeeping; cheap)."""
        return self._excluded
