"""When the answers that had to wait leave.

A send answered later (its replication, a held pull) is written at the end of the
loop turn, one write per connection for all its answers of the turn (server.tcp):
a slave's ack that releases a hundred sends is one write to their client. Code that
releases answers and has more work after them wraps the release in `at_once()`: the
answers leave when the block ends, before that work. A Raft leader answers a
committed send this way before it indexes the entry for readers (41 µs of the
leader's work per send no longer ahead of the answer at one send in flight). Nothing
can read in between: the loop polls no socket while a callback runs.
"""

from __future__ import annotations

from collections.abc import Callable

_pending: dict[int, Callable[[], None]] | None = None  # inside at_once: flushes by writer


def defer(writer: object, flush: Callable[[], None]) -> bool:
    """Inside `at_once`: run `flush` when it ends (once per writer) and say True;
    outside: False (the caller writes at the turn's end, as it would)."""
    if _pending is None:
        return False
    _pending.setdefault(id(writer), flush)
    return True


class _AtOnce:
    """`at_once`'s block (a class, not @contextmanager: a Raft leader enters one per
    commit, and the generator's machinery cost several µs of it)."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        global _pending
        self.outer = _pending is None  # nested: the outer block writes
        if self.outer:
            _pending = {}

    def __exit__(self, *exc) -> None:
        global _pending
        if self.outer:
            pending, _pending = _pending, None
            for flush in pending.values():
                flush()


def at_once() -> _AtOnce:
    """A `with` block whose deferred answers are written when it ends."""
    return _AtOnce()
