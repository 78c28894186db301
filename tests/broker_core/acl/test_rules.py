"""ACL rules: resources by name and prefix, deny over allow, source networks, system
topics named only explicitly, a super user; and the RuleSet's cached decisions agree
with a plain reference evaluator on generated rules."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.acl.rules import ACTIONS, Resource, Rule, RuleSet

IP = ipaddress.ip_address("10.1.2.3")


def test_prefix_exact_and_every_name():
    assert Resource.parse("topic:ord*").matches("topic", "orders")
    assert not Resource.parse("topic:orders").matches("topic", "orders-eu")
    assert Resource.parse("group:*").matches("group", "billing")
    assert not Resource.parse("group:*").matches("topic", "billing")
    assert Resource.parse("cluster").matches("cluster", "")
    assert Resource.parse("topic:eu|orders").matches("topic", "eu|orders")  # any topic's name


def test_deny_wins_and_nothing_is_allowed_by_default():
    rules = RuleSet([Rule.make("app", "topic:ord*", "pub,sub"),
                     Rule.make("app", "topic:orders-secret", "pub", allow=False)])
    assert rules.decide("app", "topic", "orders", "pub").allowed
    refused = rules.decide("app", "topic", "orders-secret", "pub")
    assert not refused.allowed and "denied by rule" in refused.why
    assert "no rule allows it" in rules.decide("app", "topic", "audit", "pub").why
    assert not rules.decide("other", "topic", "orders", "pub").allowed


def test_a_source_network_limits_a_rule():
    rules = RuleSet([Rule.make("app", "topic:*", "pub", source="10.1.0.0/16")])
    assert rules.decide("app", "topic", "t", "pub", IP).allowed
    assert not rules.decide("app", "topic", "t", "pub", ipaddress.ip_address("10.2.0.1")).allowed


def test_system_topics_take_sends_only_from_a_rule_that_names_them():
    rules = RuleSet([Rule.make("app", "topic:*", "pub"),
                     Rule.make("app", "topic:%RETRY%billing", "pub")])
    assert not rules.decide("app", "topic", "%TRACE%", "pub").allowed
    assert rules.decide("app", "topic", "%RETRY%billing", "pub").allowed
    assert RuleSet([], frozenset({"root"})).decide("root", "topic", "%TRACE%", "pub").allowed


@pytest.mark.parametrize("args, message", [
    (("bad user!", "topic:t", "pub"), "user name"),
    (("u", "queue:t", "pub"), "a resource is"),
    (("u", "topic:t", "publish"), "actions are"),
    (("u", "topic:t", "pub", True, "10.0.0.300/8"), "a source is"),
])
def test_a_bad_rule_is_refused_in_one_line(args, message):
    with pytest.raises(ValueError, match=message) as exc:
        Rule.make(*args)
    assert "\n" not in str(exc.value)


def reference(rules: list[Rule], user, kind, name, action, ip) -> bool:
    """The rules read literally (no index, no cache)."""
    hits = [r for r in rules if r.user == user and action in r.actions
            and r.resource.matches(kind, name) and (r.source is None or ip in r.source)
            and not (r.allow and kind == "topic" and action == "pub"
                     and name.startswith("%") and r.resource.name == "*")]
    return bool(hits) and all(r.allow for r in hits)


names = st.sampled_from(["orders", "ord", "orders-eu", "%RETRY%g", "billing", "audit"])
rule_st = st.builds(
    lambda user, kind, name, prefix, acts, allow, src: Rule.make(
        user, f"{kind}:{name}{'*' if prefix else ''}" if name != "*" else f"{kind}:*",
        sorted(acts), allow, src),
    st.sampled_from(["a", "b"]), st.sampled_from(["topic", "group"]),
    st.one_of(names, st.just("*")), st.booleans(),
    st.sets(st.sampled_from(ACTIONS), min_size=1, max_size=3), st.booleans(),
    st.sampled_from([None, "10.1.0.0/16", "10.2.0.0/16"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(rule_st, max_size=8), st.sampled_from(["a", "b"]),
       st.sampled_from(["topic", "group"]), names, st.sampled_from(ACTIONS),
       st.sampled_from(["10.1.2.3", "10.2.3.4"]))
def test_decisions_agree_with_the_rules_read_literally(rules, user, kind, name, action, ip):
    ip = ipaddress.ip_address(ip)
    ruleset = RuleSet(rules)
    for _ in range(2):  # the second answer comes from the cache
        assert ruleset.decide(user, kind, name, action, ip).allowed == \
            reference(rules, user, kind, name, action, ip)
