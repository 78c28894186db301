"""A consumer's membership of its group: one heartbeat to every broker a round, each
answering who the members are and how many queues it has; the queues are then split
evenly among the sorted members (RocketMQ's averaging allocation), so every queue has
exactly one owner once the heartbeats agree.

`GroupMember` is the membership half of client.consumer.Consumer, kept here so that
each half reads on its own: it works on the attributes Consumer.__init__ sets (the
queues owned, the pulls, the mode: client.consume_modes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from broker_core.client.connection import BrokerUnavailable
from broker_core.client.group_calls import refuses_client
from broker_core.client.retry import RETRY_PREFIX
from broker_core.errors import BrokerError
from broker_core.protocol import Op

# RocketMQ's consumers beat every 30 s; a member is gone after 3 beats missed (the
# brokers' GroupMembers): a new member is seen within a beat, a dead one's queues move
# within 15 s. At 2 s an idle consumer's beats were most of its CPU.
HEARTBEAT_S = 5.0
EMPTY_HEARTBEAT_S = 1.0  # ... while it owns no queue (its topic not made yet, say), at
# first: doubling up to HEARTBEAT_S while it stays so


class Beats:
    """One topic's answers to a round of heartbeats."""

    def __init__(self, reset: int) -> None:
        self.members: set[str] = set()
        self.queues: list[tuple[str, int]] = []
        self.reset = reset
        self.answered = 0
        self.refused: list[BrokerError] = []

    def heard(self, broker: str, answer: dict | None) -> None:
        if answer is None:  # a broker that did not answer for this topic
            return
        self.answered += 1
        self.members.update(answer.get("members", []))
        self.queues.extend((broker, q) for q in range(int(answer.get("queues", 0))))
        self.reset = max(self.reset, int(answer.get("reset", 0)))


def allocate(
    members: Sequence[str], queues: Sequence[tuple[str, int]], me: str
) -> list[tuple[str, int]]:
    """The queues `me` owns: contiguous even shares, the first ones one larger."""
    members, queues = sorted(members), sorted(queues)
    if me not in members or not queues:
        return []
    n, k = len(queues), len(members)
    i = members.index(me)
    size, extra = divmod(n, k)
    start = i * size + min(i, extra)
    return queues[start : start + size + (1 if i < extra else 0)]


def ask_brokers(call, brokers, base: dict, beats: dict[str, Beats], also: str | None,
                committed: dict | None) -> bool:
    """One heartbeat (`base`) to each broker through `call` (GroupCalls.json), the answers
    heard into `beats` (topic -> Beats). `also`: the group's retry topic, whose membership
    rides the same beats; `committed` (a broadcast instance's own offsets): where it is, for
    the broker's view of its lag. True when a broker refused `also` (no right to it: that
    consumer then beats on its own, refused, a warning a minute, and this one alone)."""
    refused_also = False
    for broker in brokers:
        beat = dict(base)
        if also is not None:
            beat["also"] = [also]
        if committed is not None:
            beat.update(broadcast=True, offsets={
                str(q): o for (b, q), o in committed.items() if b == broker})
        try:
            try:
                answer = call(broker, Op.HEARTBEAT, beat)
            except BrokerError as exc:
                if also is None or not refuses_client(exc):
                    raise
                refused_also = True
                del beat["also"]
                answer = call(broker, Op.HEARTBEAT, beat)
        except (BrokerUnavailable, BrokerError) as exc:
            if refuses_client(exc):
                for b in beats.values():
                    b.refused.append(exc)
            continue  # a broker that is down owns no queues we could pull anyway
        beats[base["topic"]].heard(broker, answer)
        if also is not None:
            beats[also].heard(broker, (answer.get("also") or {}).get(also))
    return refused_also


class GroupMember:
    """Heartbeats and the queues they leave a consumer owning (mixed into Consumer)."""

    def heartbeat(self, leave: bool = False) -> None:
        """Tell every broker we are alive; rebalance when the member set changed.
        AuthFailed, or Refused (NO_PERMISSION: no rule lets its user sub), when every
        broker that answered refused this client (it polled nothing, for ever, without a
        word); on the group's retry topic a warning a minute instead (its topic is still
        read, and what it sends back waits there unread). The retry topic's consumer is
        a member by the same beats (`also`): half the heartbeats an idle consumer sent."""
        retry = self._retry if self._retry is not None and not leave \
            and not self._also_refused else None
        beats = {self.topic: Beats(self._reset)}
        if retry is not None:
            beats[retry.topic] = Beats(retry._reset)
        base = {"client_id": self.client_id, "group": self.group, "topic": self.topic,
                "leave": leave}
        if ask_brokers(self.call_json, self.brokers, base, beats,
                       retry.topic if retry is not None else None, self.mode.beat_offsets()):
            self._also_refused = True
        self._settle(beats[self.topic], leave)
        if retry is not None:
            if beats[retry.topic].answered == beats[self.topic].answered:
                retry._settle(beats[retry.topic], False)
                retry._next_heartbeat = math.inf  # beaten with this one from now on
            else:  # a broker that does not beat for both: the retry consumer beats itself
                retry._next_heartbeat = min(retry._next_heartbeat, self.clock())

    def _settle(self, beats: Beats, leave: bool) -> None:
        """What a round of heartbeats said: the members, the queues, a reset."""
        if not leave:
            self._refusals.settle(beats.refused, beats.answered, len(self.brokers),
                                  fatal=not self.topic.startswith(RETRY_PREFIX))
        self._heard_reset(beats.reset)
        if leave:
            return
        members = beats.members | {self.client_id}
        owned = self.mode.owned(sorted(members), beats.queues)
        self._empty_beats = 0 if owned else self._empty_beats + 1
        self._next_heartbeat = self.clock() + (HEARTBEAT_S if owned else min(
            HEARTBEAT_S, EMPTY_HEARTBEAT_S * 2 ** (self._empty_beats - 1)))
        if owned != self._owned:
            self.commit()
            self.mode.moving(set(self._owned) - set(owned))
            self._owned = owned
            self._owned_by_broker = {}
            for queue in owned:
                self._owned_by_broker.setdefault(queue[0], []).append(queue)
            self.pulls.forget(owned)
        self._members = tuple(sorted(members))
        self.mode.settled()

    def _pullable(self, queue: tuple[str, int]) -> bool:
        return self.mode.pullable(queue)

    @property
    def assignment(self) -> list[tuple[str, int]]:
        return list(self._owned)

    @property
    def members(self) -> tuple[str, ...]:
        return self._members
