"""Quotas from the capacity plan: shares, headroom, the brokers left in service."""

import pytest

from capacity.quotas import (
    QuotaPlanError,
    brokers_in_service,
    parse_shares,
    per_broker,
    plan_quotas,
)


def test_shares_parse_and_bad_ones_say_which():
    assert parse_shares("orders=0.6, pay*=0.3") == {"orders": 0.6, "pay*": 0.3}
    for bad, words in (("orders", "TOPIC=SHARE"), ("orders=0", "TOPIC=SHARE"),
                       ("orders=x", "TOPIC=SHARE"), ("a=0.7,b=0.6", "over 1"), (" , ", "no topic")):
        with pytest.raises(QuotaPlanError, match=words):
            parse_shares(bad)


def test_a_brokers_quota_carries_the_topic_when_the_fuse_holds_30_percent_out():
    (q,) = plan_quotas(1_000_000, {"orders": 0.5}, headroom=0.2, burst_s=0.1)
    assert q.cluster_rate == pytest.approx(600_000)
    assert brokers_in_service(10) == 7 and brokers_in_service(3) == 3
    one = per_broker(q.to_dict(), 10)
    assert one == {"kind": "topic", "target": "orders", "rate": pytest.approx(600_000 / 7),
                   "burst": pytest.approx(600_000 / 70), "warmup_s": 0.0}


def test_no_shares_is_one_quota_for_every_topic_and_bad_plans_are_refused():
    (q,) = plan_quotas(5000, None)
    assert q.topic == "*" and q.share == 1.0
    with pytest.raises(QuotaPlanError):
        plan_quotas(0, None)
    with pytest.raises(QuotaPlanError, match="malformed quota"):
        per_broker({"topic": "t"}, 3)
    with pytest.raises(QuotaPlanError, match="no brokers"):
        brokers_in_service(0)
