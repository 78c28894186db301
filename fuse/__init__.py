"""fuse: isolate slow or failing brokers for a minute, at most 30 % of them.

The Double-11 talk's rules (在线熔断机制): at most 30 % of the brokers isolated; a broker
too slow, or whose call throws, is isolated for 1 minute; when more than 30 %
would be isolated, the brokers isolated earliest take calls again. No import
of the rest of floodgate (and none of prometheus-client).

API the producer (broker_core) calls::

    from fuse import Fuse, FuseError
    from fuse.export import metric_families

    fuse = Fuse(brokers, isolation_s=60.0, max_isolated_ratio=0.3, slow_s=0.010,
                clock=time.monotonic, dry_run=False, seed=None, colocated=())

    fuse.heartbeat(0.005)                  # from the thread that reads answers, on a timer:
                                           # the client's own lateness excuses the brokers

    broker = fuse.choose()                 # round robin over usable brokers
    broker = fuse.choose(candidates)       # ... among these (retry: minus the failed one)
    token = fuse.begin(broker)             # the call starts: judged in flight from here
    try:
        send(broker, message)
    except BrokerFault:
        fuse.end(token, ok=False)          # throws -> isolated (rule 3)
        raise
    fuse.end(token, ok=True, broker_s=t)   # too slow -> isolated (rule 2); t: the broker's
                                           # own service time from its answer, if it sent one
    # or: with fuse.calling(broker): send(broker, message)
    # or, when the RT is measured elsewhere: fuse.report(broker, rt_s, ok)

    fuse.add_broker(name) / fuse.remove_broker(name)   # route changes; cap recomputed
    fuse.tick()                            # optional timer: judge in-flight calls when idle
    snap = fuse.snapshot()                 # FuseSnapshot: isolated, excluded, overflow,
                                           # cap, counters, last 100 transitions
    snap.to_dict()                         # for /stats (JSON)
    metric_families(snap)                  # for /metrics: floodgate_fuse_isolated, _cap,
                                           # _overflow_total, _transitions_total{event}, ...

`choose` is lock-free and does housekeeping every `tick_s` (1 ms by default),
which also judges calls still in flight: a call older than the slow line counts
as slow at that moment. Slowness is the broker's part of the time and must be
the broker's alone (`fuse.lateness`, `fuse.crowd`, `fuse.slowness`). Brokers
in `colocated` share the client's host: they are isolated for slowness only
once a call hangs (10x the line). Pass `dry_run=True` to record and export
decisions while excluding nothing. `fuse.sim` compares policies in virtual time.
"""

from fuse.config import FuseConfig
from fuse.errors import FuseError
from fuse.fuse import CallToken, Fuse
from fuse.state import FuseSnapshot, IsolatedBroker, Transition

__all__ = [
    "CallToken",
    "Fuse",
    "FuseConfig",
    "FuseError",
    "FuseSnapshot",
    "IsolatedBroker",
    "Transition",
]
