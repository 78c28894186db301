"""A conditional send: stored only at the queue offset it names (optimistic concurrency).

    properties = {"EXPECT_OFFSET": "41"}   # stored as the queue's 42nd message, or not at all

The broker compares the queue's next offset (a raft leader's counts what it has not
committed yet) with the expected one as it puts the message, on its loop: nothing
runs between the two. A mismatch is answered CONFLICT with the offset the queue is at
(`at N`): nothing stored. A message with its queue's end as its key is a
compare-and-set on the queue, what `drill chaos`'s register check runs on.
"""

from __future__ import annotations

import re

PROP_EXPECT_OFFSET = "EXPECT_OFFSET"
_AT = re.compile(r"\bat (\d+)\b")


def parse_expect(value: str) -> int:
    """The expected queue offset; ValueError saying why not."""
    if not value.isdigit():
        raise ValueError(f"{PROP_EXPECT_OFFSET} must be a queue offset (an integer >= 0), "
                         f"not {value!r}")
    return int(value)


def conflict_text(topic: str, queue_id: int, at: int, expected: int) -> str:
    return f"queue {topic}:{queue_id} is at {at}, not {expected}: nothing stored"


def conflict_at(text: str) -> int | None:
    """The offset a CONFLICT answer says its queue is at."""
    m = _AT.search(text)
    return int(m.group(1)) if m else None
