"""Polling, apart from the UI: one worker thread per data source (brokers,
producers, host), each arming its next poll only after the previous one
finished, so polls of a source never overlap and a slow broker delays only
its own source. Results become a new ClusterState handed to `on_state`; the
App passes a callback that posts a message (thread-safe), so no thread here
touches a widget. A fetch that fails is state (DOWN, with the reason); an
unexpected exception is logged and the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from console.config import ConsoleConfig
from console.data.state import ClusterState, ProducerSample, build_state

log = logging.getLogger("floodgate.console")


def make_sources(cfg: ConsoleConfig) -> tuple[Any, Any, Any]:
    """(brokers, producers, host) sources for a config, by the order it documents."""
    from console.data.host import HostProbe

    if cfg.replay:
        from console.data.sources import ReplayDir

        replay = ReplayDir(cfg.replay)
        return replay, _Call(replay.fetch_producers), _Call(replay.host)
    if cfg.prometheus:
        from console.data.prometheus_source import PrometheusBrokers

        brokers = PrometheusBrokers(cfg.prometheus, cfg.timeout)
    else:
        from console.data.sources import HttpBrokers

        brokers = HttpBrokers(cfg.brokers, cfg.timeout)
    from console.data.sources import HttpProducers

    return brokers, HttpProducers(cfg.producers, cfg.timeout), HostProbe(cfg.host_profile)


class _Call:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fetch = fn

    def close(self) -> None:
        pass


class Poller:
    def __init__(self, cfg: ConsoleConfig, brokers, producers=None, host=None,
                 on_state: Callable[[ClusterState], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.brokers, self.producers, self.host = brokers, producers, host
        self.on_state = on_state or (lambda state: None)
        self.clock = clock
        self.state: ClusterState | None = None
        self._producer_samples: Sequence[ProducerSample] = ()
        self._host: dict | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first = {"producers": threading.Event(), "host": threading.Event()}
        self._threads: list[threading.Thread] = []
        self.poll_seconds: dict[str, float] = {}  # last duration per source (diagnostics)
        self.alert_events = None  # ConsoleEvents once started on a cluster file's cluster
        self.event_tail = None  # ... and the events log as it grows (the alerts screen's)
        self._logged: tuple[dict, ...] = ()

    @classmethod
    def from_config(cls, cfg: ConsoleConfig, **kwargs) -> Poller:
        return cls(cfg, *make_sources(cfg), **kwargs)

    # --- one poll of each source (also used by `floodgate status`) -------------
    def poll_producers(self) -> None:
        try:
            if self.producers is not None:
                samples = self.producers.fetch()
                with self._lock:
                    self._producer_samples = samples
        finally:
            self._first["producers"].set()

    def poll_host(self) -> None:
        try:
            if self.host is not None:
                host = self.host.fetch()
                with self._lock:
                    self._host = host
        finally:
            self._first["host"].set()

    def poll_brokers(self) -> ClusterState:
        samples = self.brokers.fetch()
        with self._lock:
            producers, host, prev = self._producer_samples, self._host, self.state
        now = _doc_time(samples) if self.cfg.replay else self.clock()
        state = build_state(samples, producers, prev, now, host, self.cfg.down_after,
                            self.cfg.sla_max_s, self.cfg.sla_mean_s, self.cfg.groups)
        with self._lock:
            self.state = state
        if self.alert_events is not None:
            self.alert_events.record(prev, state)
            if self.event_tail.poll():
                self._logged = tuple(self.event_tail.recent)
            state = replace(state, logged=self._logged)
        self.on_state(state)
        return state

    def poll_once(self) -> ClusterState:
        self.poll_producers()
        self.poll_host()
        return self.poll_brokers()

    # --- workers -----------------------------------------------------------------
    def start(self) -> Poller:
        if self.cfg.cluster is not None and self.cfg.replay is None:
            from broker_core.observe.events import EventTail, events_path_of
            from console.data.console_events import ConsoleEvents

            # a console that runs (not `status`, one look) writes the alert history
            self.alert_events = ConsoleEvents(events_path_of(self.cfg.cluster))
            self.event_tail = EventTail(events_path_of(self.cfg.cluster))
        plan = [("producers", self.poll_producers, self.cfg.refresh),
                ("host", self.poll_host, self.cfg.host_refresh),
                ("brokers", self.poll_brokers, self.cfg.refresh)]
        for name, step, every in plan:
            t = threading.Thread(target=self._loop, args=(name, step, every), daemon=True,
                                 name=f"floodgate-poll-{name}")
            self._threads.append(t)
            t.start()
        return self

    def _loop(self, name: str, step: Callable[[], Any], every: float) -> None:
        if name == "brokers":  # the first state already knows the fuses and the host
            for first in self._first.values():
                first.wait(timeout=min(2.0, every))
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                step()
            except Exception:  # noqa: BLE001 - a bad poll must not end the console
                log.exception("poll of %s failed", name)
            took = time.monotonic() - t0
            self.poll_seconds[name] = took
            self._stop.wait(max(0.0, every - took))  # armed only after this poll finished

    def stop(self, join: float = 2.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(join)
        for src in (self.brokers, self.producers, self.host):
            close = getattr(src, "close", None)
            if close:
                close()
        if self.alert_events is not None:
            self.alert_events.close()


def _doc_time(samples) -> float:
    """Replays run on the recording's clock, so their pictures never change."""
    times = [s.stats.time for s in samples if s.stats is not None and s.stats.time is not None]
    return max(times, default=0.0)
