"""Many threads calling choose/begin/end/report at once keep the fuse consistent."""

from __future__ import annotations

import itertools
import random
import threading

from fuse import Fuse


def test_concurrent_choose_and_report_stay_consistent():
    ticks = itertools.count()  # atomic under the GIL: a monotonic shared clock

    def clock() -> float:
        return next(ticks) * 0.0001  # every read moves time 0.1 ms

    brokers = [f"b{i}" for i in range(10)]
    fuse = Fuse(brokers, isolation_s=0.5, max_isolation_s=0.5, clock=clock, seed=3,
                warmup_calls=0, warmup_s=0)
    errors: list[BaseException] = []
    stop = threading.Event()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(4000):
                broker = fuse.choose()
                assert broker in brokers or broker == "extra"
                if rng.random() < 0.5:
                    token = fuse.begin(broker)
                    fuse.end(token, ok=rng.random() > 0.01)
                else:
                    rt = 0.05 if rng.random() < 0.01 else 0.001
                    fuse.report(broker, rt, ok=rng.random() > 0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def checker() -> None:
        try:
            while not stop.is_set():
                snap = fuse.snapshot()
                assert len(snap.excluded) <= snap.cap == 3
                spill = max(0, len(snap.isolated) - snap.cap)
                assert snap.overflow == {e.broker for e in snap.isolated[:spill]}
                assert not snap.excluded & snap.overflow
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def churn() -> None:  # route changes while calls fly
        try:
            while not stop.is_set():
                fuse.add_broker("extra")
                fuse.report("extra", 0.001, ok=False)
                fuse.remove_broker("extra")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    churner = threading.Thread(target=churn)
    churner.start()
    check = threading.Thread(target=checker)
    check.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop.set()
    check.join(timeout=10)
    churner.join(timeout=10)
    assert not errors, errors[0]

    snap = fuse.snapshot()
    assert snap.inflight == 0
    assert snap.transitions_total["isolate"] > 10  # the run did exercise isolation
    assert "extra" not in snap.brokers
    assert snap.transitions_total["isolate"] - snap.transitions_total["release"] == len(snap.isolated)
    assert sum(snap.isolations_total.values()) == snap.transitions_total["isolate"]
