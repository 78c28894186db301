"""The fuse's slow path: every change of isolation state, under one lock, and the
housekeeping (expiry, in-flight judgement, the baseline) that runs every `tick_s`.

`Keeper` is its own object with a narrow surface that the hot path (`fuse.Fuse`)
reads: the published routing (`usable`, `excluded`, `overflow`, `cap`), the slow
line (`threshold`, `aged_s`), the counters the hot path adds to (`answered`,
`sluggish`, `excused`) and two calls, `offend` and `housekeep`. The per-broker
states, the calls in flight and the client's lateness are the fuse's; it hands them
over at construction. Nothing here runs for a healthy call.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from fuse.config import FuseConfig
from fuse.crowd import CrowdWindow
from fuse.errors import FuseError
from fuse.inflight import InflightCalls
from fuse.isolation import IsolationList
from fuse.lateness import ClientLateness
from fuse.slowness import SHARED, UNSURE, SlowJudge, slow_alone
from fuse.state import BrokerState

REJUDGE_MARGIN = 1.2
DETAIL_CHARS = 160  # an error's text as a transition keeps it (a line on the fuse screen)


class Keeper:
    def __init__(self, config: FuseConfig, clock: Callable[[], float],
                 states: dict[str, BrokerState], calls: InflightCalls,
                 late: ClientLateness, colocated: frozenset[str],
                 seed: int | str | None = None) -> None:
        self.config = config
        self._clock = clock
        self._states = states  # the fuse's, by broker name
        self._calls = calls
        self._late = late
        self.colocated = colocated
        self._rng = random.Random(seed)
        self.lock = threading.Lock()
        self.judge = SlowJudge(config)
        self._crowd = CrowdWindow()
        self.list = IsolationList()
        self.on_isolate: list[Callable[[str, str, str], None]] = []  # Fuse.on_isolate
        self.order: list[str] = []  # brokers in the order they were added
        # what the hot path reads, replaced whole under the lock
        self.cap = 0
        self.usable: tuple[str, ...] = ()
        self.excluded: frozenset[str] = frozenset()
        self.would_exclude: frozenset[str] = frozenset()
        self.overflow: frozenset[str] = frozenset()
        self.threshold = config.slow_s
        self.aged_s = config.slow_s * config.aged_fraction
        # what the hot path adds to (unlocked: a lost increment is harmless)
        self.answered = self.sluggish = 0  # since the last housekeeping, for the crowd
        self.excused = {"client-late": 0, "aged-together": 0}
        self.next_tick = float("-inf")
        self._tick_s = config.housekeeping_s
        self._next_baseline = float("-inf")

    # ---- membership (lock held by the caller) ------------------------------

    def add_locked(self, broker: str, joined_at: float = float("-inf")) -> bool:
        if not isinstance(broker, str) or not broker:
            raise FuseError(f"a broker is a non-empty string, got {broker!r}")
        if broker in self._states:
            return False
        self._states[broker] = BrokerState(broker, joined_at=joined_at)
        self.order.append(broker)
        return True

    def remove_locked(self, broker: str) -> bool:
        state = self._states.pop(broker, None)
        if state is None:
            return False
        self.order.remove(broker)
        self.judge.forget(broker)
        self._calls.drop(broker)  # its calls in flight are not a successor's
        now = self._clock()
        if state.isolated:
            self._release_locked(state, now, "removed")
        self.rebuild_locked(now)
        return True

    def release_if_locked(self, broker: str, why: str, reason: str) -> bool:
        """End `broker`'s isolation now if every offence of it was a call that got `why`;
        isolated or not, `why` from a call begun before now is no longer held against it
        (the caller may learn that the cause is gone before a late answer says it)."""
        state = self._states.get(broker)
        if state is None or not why:
            return False
        now = self._clock()
        state.pardoned_why, state.pardoned_at = why, now
        if not state.isolated or state.episode_why != why:
            return False
        self._release_locked(state, now, reason)
        self.rebuild_locked(now)
        return True

    # ---- what the hot path calls -------------------------------------------

    def offend(self, state: BrokerState, ok: bool, rt: float, counts: int,
               why: str = "") -> None:
        """A slow (`ok`) or failed call of `state`'s broker, worth `counts` offences;
        `why`: what the failed call got."""
        with self.lock:
            if self._states.get(state.name) is state:
                self._offend_locked(state, "slow" if ok else "error", self._clock(), rt, counts,
                                    why=why)

    # ---- housekeeping -----------------------------------------------------

    def housekeep(self, block: bool) -> None:
        """Expire isolations, judge calls still in flight, refresh the baseline; with
        `block=False`, nothing if another thread is at it."""
        if not self.lock.acquire(blocking=block):
            return  # another thread is doing it right now
        try:
            now = self._clock()
            self.next_tick = now + self._tick_s
            changed = self._expire_locked(now)
            answered, sluggish = self.answered, self.sluggish
            self.answered -= answered  # (an increment racing this is kept for next time)
            self.sluggish -= sluggish
            self._crowd.add(now, answered, sluggish)
            self._crowd.fold(now)
            if now >= self._next_baseline:
                self._next_baseline = now + self.config.baseline_interval_s
                self.threshold = self.judge.refresh(self._states.values())
                self.aged_s = self.threshold * self.config.aged_fraction
                changed = self._rejudge_locked(now) or changed
            # A call in flight counts once past the line, once more past twice it
            # and once more when stuck, in time the client was watching.
            line = self.threshold
            lines = (line, 2.0 * line, self.config.stuck_line(line),
                     self.config.hung_line(line))
            cut = self._late.cutoff if self._late.active else (lambda t, d: t - d)
            stages = self._calls.climb(tuple(cut(now, d) for d in lines))
            if any(stages):
                self._judge_overdue_locked(now, *stages)
            if changed:
                self.rebuild_locked(now)
        finally:
            self.lock.release()

    def _judge_overdue_locked(self, now: float, past_line: dict, past_twice: dict,
                              stuck: dict, hung: dict) -> None:
        """Offences for calls overdue in flight, unless most brokers aged together:
        then the client (or the whole cluster) is late and nobody is isolated.
        Each is judged against the brokers serving before this batch."""
        stages = (past_line, past_twice, stuck, hung)
        serving = self.usable
        overdue = dict.fromkeys([*past_line, *past_twice, *stuck, *hung])  # ordered
        for broker, (calls, _start) in stuck.items():
            state = self._states.get(broker)
            if state is not None:
                state.stuck += calls
        for broker in overdue:
            self.judge.mark_slow(broker, now)
        if len(overdue) > 1 and self.judge.cluster_slow(now, len(self._states)):
            if not stuck and not hung:  # stuck calls are judged one by one (slow alone?)
                self.excused["aged-together"] += sum(
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
        line = self.threshold / REJUDGE_MARGIN  # margin: the line wobbles with the baseline
        undo = [st for st in self.list.entries
                if st.episode_errors == 0 and st.worst_rt_s < line and not st.stuck]
        for state in undo:
            self._release_locked(state, now, "rejudged")
        return bool(undo)

    def _expire_locked(self, now: float) -> bool:
        expired = [st for st in self.list.entries if st.until <= now]
        for state in expired:
            self._release_locked(state, now, "expired")
        return bool(expired)

    # ---- state changes (lock held) ---------------------------------------

    def _offend_locked(self, state: BrokerState, reason: str, now: float, rt: float,
                       calls: int = 1, serving: tuple[str, ...] | None = None,
                       why: str = "") -> None:
        cfg = self.config
        if reason == "slow" and not self._slow_enough_locked(state, now, rt, calls, serving):
            return
        if why and why == state.pardoned_why and now - rt <= state.pardoned_at:
            return  # began before release_if knew that cause gone: the cause, not news
        jitter = 1.0 + self._rng.random() * cfg.jitter_ratio
        state.reason = reason
        state.last_offence = now
        error = reason == "error"
        if state.isolated:  # offending again: the minute restarts from now
            state.offences += 1
            state.episode_errors += error
            if not error or why != state.episode_why:
                state.episode_why = ""
            if not error:
                state.worst_rt_s = max(state.worst_rt_s, rt)
            state.until = max(state.until, now + state.duration_s * jitter)
            return
        repeat = state.released_at is not None and now - state.released_at <= cfg.isolation_s
        state.repeats = state.repeats + 1 if repeat else 0
        state.duration_s = min(cfg.isolation_s * cfg.backoff**state.repeats, cfg.max_isolation_s)
        state.offences = 1
        state.cause = reason
        state.episode_errors = int(error)
        state.episode_why = why if error else ""
        state.worst_rt_s = 0.0 if error else rt
        state.since = now
        state.until = now + state.duration_s * jitter
        state.isolations += 1
        # what an operator asks first: what the call got, or how slow against what (the
        # line moves with the cluster's baseline)
        detail = why[:DETAIL_CHARS] if error else (f"a call of {rt * 1000:.1f} ms, the line "
                                                   f"{self.threshold * 1000:.1f} ms")
        self.list.add(state, now, reason, detail)
        self.rebuild_locked(now)
        if not cfg.dry_run:
            for hook in self.on_isolate:
                hook(state.name, reason, detail)

    def _slow_enough_locked(self, state: BrokerState, now: float, rt: float, calls: int,
                            serving: tuple[str, ...] | None) -> bool:
        """Does a slow call (or `calls` counts of one) make `state` slow? The same test
        isolates a broker and keeps an isolated one (serving as overflow) isolated."""
        cfg = self.config
        if state.samples < cfg.warmup_calls or now - state.first_seen < cfg.warmup_s:
            return False  # its first calls carry the connect and a cold broker's start
        stuck = rt > cfg.stuck_line(self.threshold)
        if self.judge.note_slow(state.name, now, len(self._states)) and not stuck:
            self._release_cluster_slow_locked(now)
            return False
        if not state.isolated:  # a suspect until slow_calls within slow_window_s
            if now - state.suspect_since > cfg.slow_window_s:
                state.suspect_since, state.suspect_calls = now, 0
            state.suspect_calls += calls
            if state.suspect_calls < cfg.slow_calls:
                return False
        if state.name in self.colocated and rt <= cfg.hung_line(self.threshold):
            return False  # a suspect until a call hangs: see `colocated`
        verdict = slow_alone(state.name, rt, serving or self.usable, self._states,
                             self._aged_before, self._crowd, now, self.threshold, cfg)
        if verdict == UNSURE:
            return False  # still a suspect: the next, stronger evidence decides
        state.suspect_since, state.suspect_calls = float("-inf"), 0
        if verdict == SHARED:
            self.excused["aged-together"] += calls
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
        stuck_s = self.config.stuck_line(self.threshold)
        undo = [st for st in self.list.entries if st.episode_errors == 0 and
                st.since >= horizon and not st.stuck and st.worst_rt_s <= stuck_s]
        for state in undo:
            self._release_locked(state, now, "cluster-slow")
        if undo:
            self.rebuild_locked(now)

    def _release_locked(self, state: BrokerState, now: float, reason: str) -> None:
        self.list.release(state, now, reason)

    def rebuild_locked(self, now: float) -> None:
        """Split the isolation list at the cap and republish what `choose` reads."""
        self.cap = self.config.cap(len(self._states))
        would, self.overflow = self.list.split(self.cap, now)
        self.would_exclude = would
        self.excluded = frozenset() if self.config.dry_run else would
        self.usable = tuple(b for b in self.order if b not in self.excluded)

    def rank(self, broker: str) -> float:
        """Choosing among excluded brokers: the one isolated earliest first (rule 4)."""
        state = self._states.get(broker)
        return state.since if state is not None and state.isolated else float("-inf")
