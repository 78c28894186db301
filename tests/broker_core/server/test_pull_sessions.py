"""Pull sessions through the broker in-process: a consumer names its queues once and
then what changed; the broker answers the queues that have something and looks at
no other; arrivals wake a held session pull; a session out of step is refused in
words; idle sessions are swept (on the sessions' own clock)."""

from __future__ import annotations

import asyncio

import pytest

from broker_core import protocol as p
from broker_core.server import pull_sessions
from broker_core.server.broker import Broker, BrokerConfig
from broker_core.server.pull_sessions import IDLE_S, PullSessions
from tests.broker_core.server.test_pull_ops import answer, send

pytestmark = pytest.mark.timeout(30)

QUEUES = 200
SID = 0xF100D


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=1 << 20,
                            store_extra={"max_message_bytes": 8 * 1024,
                                         "preallocate_next": False}))
    b.topics.put("orders", QUEUES)
    yield b
    b.close()


def spull(broker, queues, epoch, wait_ms=0, replies=None, sid=SID, group="g"):
    """A session pull's raw answer parts now, or None when it was held."""
    req = p.PullRequest(group, "orders", list(queues), 64, wait_ms, session=sid, epoch=epoch)
    return broker.pulls.pull(7, p.encode_pull(req), 0.0,
                             [].append if replies is None else replies.append)


def read(parts):
    return [(s.queue_id, [m.body for m in msgs]) for s, msgs, _c in answer(parts)]


def code(parts) -> int:
    return p.decode_header(b"".join(parts)).code


def counted(broker) -> list[int]:
    """How many queues the sessions look at, counted from now."""
    sessions, seen = broker.pulls.sessions, [0]
    lookup = sessions.lookup

    def counting(topic, qid):
        seen[0] += 1
        return lookup(topic, qid)

    sessions.lookup = counting
    return seen


def test_a_session_answers_the_queues_with_something_and_then_looks_only_at_changes(broker):
    every = [(q, 0) for q in range(QUEUES)]
    assert read(spull(broker, every, 0)) == []  # all caught up: nothing to answer
    send(broker, 5, b"five")
    send(broker, 150, b"one-fifty")
    seen = counted(broker)
    assert sorted(read(spull(broker, [], 1))) == [(5, [b"five"]), (150, [b"one-fifty"])]
    assert seen[0] <= 4  # the two that had arrivals, not the 200 named at first
    seen[0] = 0
    assert read(spull(broker, [(5, 1), (150, 1)], 2)) == []  # their offsets moved past
    assert seen[0] <= 2
    send(broker, 5, b"again")
    assert read(spull(broker, [], 3)) == [(5, [b"again"])]


def test_a_held_session_pull_wakes_for_its_queues_not_one_it_dropped_or_never_named(broker):
    async def main():
        replies: list[list[bytes]] = []
        assert spull(broker, [(q, 0) for q in range(100)], 0, 5000, replies) is None
        assert spull(broker, [(7, p.QUEUE_GONE)], 1, 5000, replies) is None
        assert replies and read(replies.pop()) == []  # the first, given up on, answered
        send(broker, 7, b"dropped")
        send(broker, 120, b"not named")
        await asyncio.sleep(broker.pulls.hold_s * 3)
        assert not replies and broker.pulls.held == 1
        send(broker, 42, b"mine")
        while not replies:
            await asyncio.sleep(0.001)
        assert read(replies[0]) == [(42, [b"mine"])]
        assert broker.pulls.held == 0 and len(broker.pulls.sessions) == 1  # kept

    asyncio.run(main())


def test_a_session_out_of_step_or_unknown_is_refused_and_then_named_anew(broker):
    every = [(q, 0) for q in range(QUEUES)]
    assert code(spull(broker, [], 1, sid=99)) == p.Code.PULL_SESSION_GONE  # never opened
    spull(broker, every, 0)
    assert code(spull(broker, [], 1, group="other")) == p.Code.PULL_SESSION_GONE
    assert code(spull(broker, [], 1)) == p.Code.PULL_SESSION_GONE  # refused: closed
    spull(broker, every, 0)
    spull(broker, [], 1)
    assert code(spull(broker, [], 3)) == p.Code.PULL_SESSION_GONE  # epoch 2 lost on the way
    assert len(broker.pulls.sessions) == 0
    send(broker, 9, b"after")
    assert read(spull(broker, every, 0)) == [(9, [b"after"])]  # every queue named again


def test_a_held_session_pull_at_its_timeout_looks_at_every_queue_again(broker):
    """What moved without an arrival (here, stored without the pull ops hearing of
    it) is found when the pull times out."""
    async def main():
        replies: list[list[bytes]] = []
        assert spull(broker, [(q, 0) for q in range(QUEUES)], 0, 50, replies) is None
        broker.store.put("orders", 77, b"unheralded")
        while not replies:
            await asyncio.sleep(0.005)
        assert read(replies[0]) == [(77, [b"unheralded"])]

    asyncio.run(main())


def test_idle_sessions_are_swept_when_one_opens_and_their_number_is_bounded(
        broker, monkeypatch):
    now = [0.0]
    sessions = PullSessions(broker.pulls.sessions.lookup, lambda: now[0])

    def open_(sid):
        return sessions.open(p.PullRequest("g", "orders", [(0, 0)], session=sid))

    for sid in (1, 2, 3):
        open_(sid)
    now[0] = IDLE_S - 1
    sessions.follow(p.PullRequest("g", "orders", [], session=2, epoch=1))  # 2 in use
    now[0] = IDLE_S + 0.5
    open_(4)
    assert sessions.get(1) is None and sessions.get(3) is None
    assert sessions.get(2) is not None and len(sessions) == 2
    monkeypatch.setattr(pull_sessions, "MAX_SESSIONS", 3)
    open_(5)
    open_(6)  # a fourth: the least recently used (2) goes
    assert sessions.get(2) is None and len(sessions) == 3
    monkeypatch.setattr(pull_sessions, "MAX_QUEUES", 4)  # 3 named: room for 1 more
    sessions.open(p.PullRequest("g", "orders", [(0, 0), (1, 0)], session=7))
    assert sessions.get(4) is None and sessions.get(5) is not None  # one made room
    assert sessions.queues == 4


def test_the_brokers_stats_say_what_is_held_and_what_sessions_keep(broker):
    async def main():
        spull(broker, [(q, 0) for q in range(QUEUES)], 0, 5000)
        assert broker.stats()["pulls"] == {"held": 1, "sessions": 1, "session_queues": QUEUES}
        broker.pulls.answer_all()  # (/stats is the second's snapshot: the figures now)
        assert broker.pulls.figures() == {"held": 0, "sessions": 0, "session_queues": 0}

    asyncio.run(main())
