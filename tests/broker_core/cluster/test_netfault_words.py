"""How `fault net` and `fault show` name a network fault: what and for how long it has
been in force (it read "isolate group-1-a, for 0 s" as it began, like a length)."""

from broker_core.cluster.netfault import describe


def test_a_fault_says_how_long_it_has_been_in_force():
    fault = {"kind": "isolate", "a": ["group-1-a"], "b": [], "since": 1000.0}
    assert describe(fault, now=1000.2) == "isolate group-1-a, from now"
    assert describe(fault, now=1015.4) == "isolate group-1-a, in force for 15 s"
    one_way = {"kind": "partition", "a": ["a", "b"], "b": ["c"], "one_way": True,
               "since": 1000.0}
    assert describe(one_way, now=1003) == "partition a,b -/-> c, in force for 3 s"
    assert describe({"kind": "loss", "node": "a", "pct": 2.5, "since": 1000.0},
                    now=1060) == "loss 2.5 % on a's link, in force for 60 s"
