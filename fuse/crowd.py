"""How sluggish the crowd of calls is right now, against how sluggish it usually is.

When the host every broker shares (or the network next to the client) is short
for a few tens of ms, calls to every broker slow down at once: the share of
*sluggish* answers (over a quarter of the slow line) jumps from the usual few
per cent to a third or more. A PageCache stall leaves that share alone (its
own calls are stuck, not answered), and so does a broker that is always slow
(the usual share already holds it). So a rise of the crowd's share well over
its usual level within the evidence's wait says: not this broker's fault.

Answers land in 2 ms buckets of a 256 ms ring. The fuse counts them in two
plain integers on its hot path and hands the counts over at housekeeping
(`add`, every millisecond), so a call pays one increment.
"""

from __future__ import annotations

BUCKET_S = 0.002
BUCKETS = 128  # 256 ms: longer than any wait judged before it is stuck
USUAL_ALPHA = 0.001  # the usual share: an average over ~1,000 buckets (2 s)


class CrowdWindow:
    def __init__(self) -> None:
        self._slots = [[-1, 0, 0] for _ in range(BUCKETS)]  # [bucket, answers, sluggish]
        self.usual_share = 0.0
        self._folded = -1  # newest bucket folded into usual_share

    def add(self, now: float, answers: int, sluggish: int) -> None:
        """Answers (of which `sluggish`) that arrived since the last add."""
        if not answers:
            return
        bucket = int(now * (1.0 / BUCKET_S))
        slot = self._slots[bucket % BUCKETS]
        if slot[0] != bucket:
            slot[0], slot[1], slot[2] = bucket, 0, 0
        slot[1] += answers
        slot[2] += sluggish

    def share(self, since: float, now: float) -> tuple[int, int]:
        """(answers, sluggish ones) in the buckets between `since` and `now`."""
        first = int(since * (1.0 / BUCKET_S))
        last = int(now * (1.0 / BUCKET_S))
        first = max(first, last - BUCKETS + 1)
        answers = sluggish = 0
        for slot in self._slots:
            if first <= slot[0] <= last:
                answers += slot[1]
                sluggish += slot[2]
        return answers, sluggish

    def fold(self, now: float) -> None:
        """Fold closed buckets into the usual share (housekeeping, under the lock)."""
        last_closed = int(now * (1.0 / BUCKET_S)) - 1
        start = max(self._folded + 1, last_closed - BUCKETS + 1)
        for bucket in range(start, last_closed + 1):
            slot = self._slots[bucket % BUCKETS]
            if slot[0] == bucket and slot[1]:
                self.usual_share += (slot[2] / slot[1] - self.usual_share) * USUAL_ALPHA
        self._folded = max(self._folded, last_closed)

    def judge(self, since: float, now: float, min_share: float, factor: float,
              waiting: int = 0, min_answers: int = 8) -> str:
        """How the crowd of answers since `since` compares with its usual self:
        "surged" (at least `min_share` sluggish and `factor` times the usual share),
        "stirring" (over `factor` times the usual share and a third of
        `min_share`: it may be turning), or "calm". `waiting` calls still in
        flight but already sluggish count as sluggish answers."""
        answers, sluggish = self.share(since, now)
        answers += waiting
        sluggish += waiting
        if answers < min_answers:
            return "calm"
        share = sluggish / answers
        if share < factor * self.usual_share or sluggish < 3:  # one or two: a healthy tail
            return "calm"
        if share >= min_share:
            return "surged"
        return "stirring" if share >= min_share / 3.0 else "calm"
