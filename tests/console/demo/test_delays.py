"""The demo's consumer delays (console.demo.delays): counted on the consumer's thread,
written by a thread of their own."""

from __future__ import annotations

import time
from types import SimpleNamespace

from broker_core.client.loadgen import STAMP
from console.demo.delays import Delays, summarize
from tests.waiting import wait_for


def stamped(ago_s: float) -> SimpleNamespace:
    return SimpleNamespace(body=STAMP.pack(time.time() - ago_s) + b"x" * 8)


def test_counting_a_delivery_writes_nothing_on_the_consumers_thread(tmp_path):
    delays = Delays(tmp_path, "fast", save_every_s=0.0)  # (a save would be due at once)
    delays.record("billing", [stamped(0.002), stamped(0.004)])
    assert not delays.path.exists()
    delays.save()
    got = summarize(tmp_path)["billing"]
    assert got["count"] == 2
    assert 0.001 <= got["p50_s"] <= 0.1


def test_the_saver_writes_on_its_own_and_once_more_when_closed(tmp_path):
    delays = Delays(tmp_path, "fast", save_every_s=0.05).start()
    try:
        delays.record("billing", [stamped(0.003)])
        wait_for(delays.path.exists, 10, "the saver's first write")
        delays.record("billing", [stamped(0.003)])
    finally:
        delays.close()
    assert summarize(tmp_path)["billing"]["count"] == 2  # what came after its last beat
