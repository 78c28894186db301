"""Wait for a condition instead of sleeping a fixed time: a test on a loaded 2-core
machine must neither flake when things are slow nor idle when they are fast."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float = 10.0, what: str = "condition", *,
             every: float = 0.05, ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Poll `cond` until it returns something true and return that; AssertionError
    naming `what` and the last value after `timeout` s. Exceptions in `ignore`
    (a server not up yet) count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = cond()
        except ignore as exc:
            value = exc
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s (last: {value!r})")
        time.sleep(every)


async def until(cond: Callable[[], T], timeout: float = 10.0,
                what: str = "condition met") -> T:
    """`wait_for` on an event loop: the loop runs meanwhile (the servers under test are
    on it), the timeout on its clock; returns what `cond` returned."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := cond()):
        assert loop.time() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(0.01)
    return value
