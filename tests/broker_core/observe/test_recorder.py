"""OpRecorder's windows: the counts kept running (the second that closes added, the one
that leaves taken out) equal the merge of the window's closed seconds, bucket for bucket,
across a full history ring and a long pause."""

from __future__ import annotations

import random

from broker_core.observe.recorder import WINDOWS_S, OpRecorder, OpSecond


def figures(fig: OpSecond) -> tuple:
    h = fig.hist
    return (h.buckets, h.count, h.sum, h.min, h.max, fig.over_sla, fig.msgs, fig.bytes,
            fig.errors, h.quantile(0.99))


def test_running_windows_equal_the_merge_of_their_seconds():
    clock = [1000.0]
    rec = OpRecorder(("send", "pull"), lambda: clock[0], history_s=80)
    rng = random.Random(7)
    for step in range(400):
        for _ in range(rng.choice((0, 0, 1, 5, 40))):  # idle seconds too
            rec.record("send", rng.lognormvariate(-6, 1.5), 1, 100, ok=rng.random() > 0.05)
        if rng.random() < 0.3:
            rec.record("pull", rng.uniform(0, 0.05), 3, 300)
        clock[0] += 1 if step != 250 else 500  # once, a pause longer than the history
        rec.roll()
        if step % 37 == 0 or step in (251, 252, 399):
            for op in rec.ops:
                for w in (*WINDOWS_S, 300):  # 300: more than is kept, the merge path
                    assert figures(rec.window(op, w)) == figures(rec.merged_window(op, w)), (step, op, w)


def test_a_window_is_a_copy_the_next_second_does_not_change():
    clock = [0.0]
    rec = OpRecorder(("send",), lambda: clock[0])
    rec.record("send", 0.001)
    clock[0] += 1
    rec.roll()
    before = rec.window("send", 10)
    rec.record("send", 0.5)
    clock[0] += 1
    rec.roll()
    assert before.hist.count == 1 and before.hist.max == 0.001
    assert rec.window("send", 10).hist.count == 2
