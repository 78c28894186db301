"""The slow path of `Fuse`: housekeeping (expiry, in-flight judgement, the
baseline) and every change of isolation state, all with the fuse's lock held.

A mixin rather than a second object so `fuse.py` reads as the hot path alone
while both halves share the fuse's fields; nothing here runs per call.
"""

from __future__ import annotations

from fuse.slowness import SHARED, UNSURE, slow_alone
from fuse.state import BrokerState

REJUDGE_MARGIN = 1.2


class Housekeeping:
    """Mixed into `Fuse`; uses its fields (`_lock`, `_states`, `_list`, ...)."""

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
