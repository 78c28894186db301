"""Flow control (限流): token buckets on an injected clock, quotas kept in the data dir,
FLOW_CONTROL answered before anything is stored."""

import pytest

from broker_core import protocol as p
from broker_core.errors import BrokerError
from broker_core.protocol import Code
from broker_core.server.broker import Broker
from broker_core.server.config import BrokerConfig
from broker_core.server.flow_control import FlowControl, Quota, QuotaError, TokenBucket
from tests.clock import ManualClock


def admitted_over(bucket: TokenBucket, clock: ManualClock, seconds: float, offered: float) -> int:
    """Offer `offered` msgs/s, one at a time, for `seconds`; how many passed."""
    n, step = 0, 1.0 / offered
    end = clock.t + seconds
    while clock.t < end:
        if bucket.take(1, clock.t) == 0:
            n += 1
        clock.advance(step)
    return n


def test_bucket_admits_its_rate_plus_one_burst_under_five_times_the_load():
    clock = ManualClock(0.0)
    b = TokenBucket(Quota.make("topic", "t", 1000, burst=50), clock.t)
    got = admitted_over(b, clock, 10.0, 5000)
    assert got == pytest.approx(10 * 1000 + 50, abs=3)


def test_burst_passes_at_once_then_the_hint_says_when_the_next_token_comes():
    clock = ManualClock(0.0)
    b = TokenBucket(Quota.make("topic", "t", 100, burst=10), clock.t)
    for _ in range(10):
        assert b.take(1, clock.t) == 0
    assert b.take(1, clock.t) == pytest.approx(0.01)
    assert b.take(5, clock.t) == pytest.approx(0.05)  # the refusal took nothing
    clock.advance(0.01)
    assert b.take(1, clock.t) == 0


def test_warmup_starts_at_a_third_and_reaches_the_rate_after_warmup_s():
    clock = ManualClock(0.0)
    b = TokenBucket(Quota.make("topic", "t", 3000, burst=30, warmup_s=10), clock.t)
    first = admitted_over(b, clock, 1.0, 10_000)
    assert first == pytest.approx(1000 * 1.1, rel=0.1)  # ~rate/3 (rising slightly)
    admitted_over(b, clock, 9.0, 10_000)
    last = admitted_over(b, clock, 1.0, 10_000)
    assert last == pytest.approx(3000, rel=0.02)
    # idle for a warm-up period: cold again
    clock.advance(10.0)
    assert admitted_over(b, clock, 1.0, 10_000) < 1300


def test_a_batch_bigger_than_the_bucket_passes_when_full_and_is_paid_back():
    clock = ManualClock(0.0)
    b = TokenBucket(Quota.make("topic", "t", 100, burst=10), clock.t)
    assert b.take(40, clock.t) == 0
    assert b.take(1, clock.t) == pytest.approx(0.31)  # 30 owed, then one more


@pytest.mark.parametrize(("args", "message"), [
    (("topic", "t", -5), "rate must be a positive"),
    (("topic", "t", 0), "rate must be a positive"),
    (("topic", "t", float("nan")), "finite"),
    (("topic", "t", "fast"), "must be a number"),
    (("topic", "orders[0-9]", 10), "unknown topic pattern"),
    (("topic", "*orders", 10), "unknown topic pattern"),
    (("topic", "", 10), "unknown topic pattern"),
    (("queue", "t", 10), "kind must be topic or group"),
    (("group", "g", 10, 0.5), "burst must be at least 1"),
    (("group", "g", 10, None, -1), "warmup must be >= 0"),
])
def test_malformed_quotas_are_refused_with_one_line(args, message):
    with pytest.raises(QuotaError, match=message) as exc:
        Quota.make(*args)
    assert "\n" not in str(exc.value)


def test_exact_names_win_then_the_longest_prefix_each_name_its_own_bucket(tmp_path):
    clock = ManualClock(0.0)
    fc = FlowControl(tmp_path / "quotas.json", clock)
    fc.set(Quota.make("topic", "*", 1000, burst=1))
    fc.set(Quota.make("topic", "order*", 10, burst=1))
    fc.set(Quota.make("topic", "orders-vip", 100, burst=1))
    assert fc.admit("orders-vip", "") == 0 and fc.admit("orders-vip", "") == pytest.approx(0.01)
    assert fc.admit("orders", "") == 0 and fc.admit("orders", "") == pytest.approx(0.1)
    assert fc.admit("order-items", "") == 0  # its own bucket of the same rule
    assert fc.admit("logs", "") == 0 and fc.admit("logs", "") == pytest.approx(0.001)


def test_topic_and_group_must_both_admit_and_a_refusal_takes_nothing(tmp_path):
    clock = ManualClock(0.0)
    fc = FlowControl(tmp_path / "quotas.json", clock)
    fc.set(Quota.make("topic", "t", 100, burst=2))
    fc.set(Quota.make("group", "flood", 10, burst=1))
    assert fc.admit("t", "flood") == 0
    assert fc.admit("t", "flood") == pytest.approx(0.1)  # the group is out
    assert fc.admit("t", "calm") == 0  # the topic still had its second token
    assert fc.admit("t", "calm") > 0
    assert fc.throttled == {("t", "flood"): 1, ("t", "calm"): 1}


def test_quotas_are_kept_in_the_data_dir_and_cleared_by_kind_and_target(tmp_path):
    path = tmp_path / "quotas.json"
    fc = FlowControl(path)
    fc.set(Quota.make("topic", "t", 100, burst=5, warmup_s=30))
    fc.set(Quota.make("group", "g*", 50))
    again = FlowControl(path)
    assert again.quotas == fc.quotas
    assert again.clear("group") == 1
    assert list(FlowControl(path).quotas) == [("topic", "t")]
    assert FlowControl(path).clear() == 1 and not FlowControl(path).quotas


def test_a_corrupt_quota_file_stops_the_broker_with_one_line(tmp_path):
    path = tmp_path / "quotas.json"
    path.write_text('{"topic": {"t": {"rate": -1}}}')
    with pytest.raises(BrokerError, match=r"quotas.json: bad quota \(rate must be"):
        FlowControl(path)


def _answer(broker, body: bytes) -> tuple[int, bytes]:
    """(code, body) of a send answered at once (no fault: nothing waits)."""
    frame = broker.sends.send(1, body, 0.0, None)
    return p.decode_header(frame).code, frame[p.HEADER_SIZE:]


def _send(broker, topic="t", group="g"):
    msg = p.OutMessage(b"x", properties={p.PRODUCER_GROUP: group} if group else {})
    return _answer(broker, p.encode_send(topic, -1, msg))


def test_the_broker_answers_flow_control_with_a_hint_and_stores_nothing(broker):
    broker.flow.set(Quota.make("group", "flood", 1, burst=1))
    assert _send(broker, group="flood")[0] == Code.OK
    code, body = _send(broker, group="flood")
    assert code == Code.FLOW_CONTROL
    wait, why = p.decode_flow_control(body)
    assert 0 < wait <= 1.0 and "group flood over its quota" in why
    assert _send(broker, group="calm")[0] == Code.OK  # another group is not held back
    snap = broker.stats(0)
    assert snap["totals"]["flow_control"] == 1 and snap["totals"]["send_errors"] == 0
    assert sum(q for q in (broker.store.queue_offsets("t", i)[1] for i in range(4))) == 2
    assert snap["flow"]["throttled"] == [{"topic": "t", "group": "flood", "count": 1}]


def test_quotas_survive_a_broker_restart(tmp_path):
    cfg = BrokerConfig("b1", tmp_path / "b1", segment_bytes=8 << 20)
    b = Broker(cfg)
    b.flow.set(Quota.make("topic", "t", 1, burst=1))
    b.close()
    b = Broker(cfg)
    try:
        assert _send(b)[0] == Code.OK
        assert _send(b)[0] == Code.FLOW_CONTROL
    finally:
        b.close()


def test_a_send_refused_for_another_reason_takes_no_token(broker):
    broker.flow.set(Quota.make("topic", "t", 1, burst=1))
    out_of_range = p.encode_send("t", 99, p.OutMessage(b"x"))
    assert _answer(broker, out_of_range)[0] == Code.BAD_REQUEST
    assert _send(broker)[0] == Code.OK  # the token was still there
