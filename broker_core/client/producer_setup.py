"""What both producers do before their first send: brokers by name, and the fuse they
send through (a fuse of their own unless given one); and what they do when the routes
move: a group whose master has a slave in sync again is let back."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from broker_core.client.attempts import NO_SLAVE_IN_SYNC
from broker_core.client.connection import is_local


def normalize_brokers(brokers: Sequence[str] | Mapping[str, str] | str) -> dict[str, str]:
    """Name -> address. A list of addresses names each broker by its address."""
    if isinstance(brokers, str):
        brokers = [b for b in brokers.split(",") if b.strip()]
    if isinstance(brokers, Mapping):
        out = dict(brokers)
    else:
        out = {b.strip(): b.strip() for b in brokers}
    if not out:
        raise ValueError("no brokers given")
    return out


def default_fuse(brokers: Mapping[str, str], clock: Callable[[], float] = time.monotonic):
    """The fuse a producer gets unless it is given one (or `fuse=False`); brokers on
    this host are marked co-located (they share its cores)."""
    from fuse import Fuse

    return Fuse(list(brokers), clock=clock,
                colocated=[b for b, addr in brokers.items() if addr and is_local(addr)])


def producer_brokers(brokers, routes, fuse, clock, credentials=None
                     ) -> tuple[dict[str, str], object | None]:
    """Both producers' start: (name -> address, the fuse or None). With `routes` the
    brokers are its groups at their masters; `fuse=None` gets the default fuse,
    `fuse=False` none (plain round robin). On raft groups the fuse tells a leader it
    isolates for slowness (client.slow_leaders)."""
    if routes is not None:
        brokers = routes.masters()
    brokers = normalize_brokers(brokers)
    if fuse is None:
        fuse = default_fuse(brokers, clock)
    if fuse and getattr(routes, "what", "") == "leader":
        from broker_core.client.slow_leaders import SlowLeaders

        fuse.on_isolate(SlowLeaders(routes, credentials))
    return brokers, fuse or None


def release_resynced(fuse, routes) -> None:
    """Each group whose master has a slave in sync again: an isolation its one-copy
    answers alone caused ends now ("in-sync"), not at the end of its minute."""
    for group in routes.groups:
        if routes.copies(group) > 1:
            fuse.release_if(group, NO_SLAVE_IN_SYNC, "in-sync")
