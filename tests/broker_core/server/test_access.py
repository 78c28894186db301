"""Every op through a connection guard: what it needs (the resource in its body and the
action), allowed with exactly that permission and refused without it; nothing but the
handshake before authentication; a changed ACL seen on the next request; a user removed
is refused on its open connection; a super user is allowed all, the ACL op only to it."""

from __future__ import annotations

import pytest

from broker_core import protocol as p
from broker_core.acl.rules import Rule
from broker_core.acl.users import User
from broker_core.client.producer import encode_many
from broker_core.protocol import Op
from broker_core.server.access import Access
from broker_core.server.acl_table import AclTable

J = p.encode_json
SEND = p.encode_send("orders", -1, p.OutMessage(b"x"))
PULL = p.encode_pull(p.PullRequest("billing", "orders", [(0, 0)], 32, 0))
SUB = {"group": "billing", "topic": "orders", "queue_id": 0, "offset": 1, "client_id": "c",
       "queues": [0]}

# op, body, the permissions that allow it (each as resource, action)
MATRIX = [
    (Op.SEND, SEND, [("topic:orders", "pub")]),
    (Op.SEND_BATCH, encode_many("orders", [b"x", b"y"]), [("topic:orders", "pub")]),
    (Op.PULL, PULL, [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.QUERY_OFFSET, J(SUB), [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.COMMIT_OFFSET, J(SUB), [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.HEARTBEAT, J(SUB), [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.LOCK_BATCH, J(SUB), [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.UNLOCK_BATCH, J(SUB), [("topic:orders", "sub"), ("group:billing", "sub")]),
    (Op.ROUTE, J({"topic": "orders"}), [("topic:orders", "sub")]),
    (Op.END_TRANSACTION, J({"offset": 1, "decision": "COMMIT", "by": "producer",
                            "group": "payments"}), [("group:payments", "pub")]),
    (Op.END_TRANSACTION, J({"offset": 1, "decision": "COMMIT", "by": "operator"}),
     [("cluster", "update")]),
    (Op.CHECK_TRANSACTION, J({"group": "payments"}), [("group:payments", "pub")]),
    (Op.LIST_TRANSACTIONS, J({}), [("cluster", "list")]),
    (Op.STATS, J({}), [("cluster", "get")]),
    (Op.HA_STATE, J({}), [("cluster", "get")]),
    (Op.QUERY_BY_KEY, J({"key": "k"}), [("cluster", "get")]),
    (Op.VIEW_BY_ID, J({"id": "x"}), [("cluster", "get")]),
    (Op.QUERY_BY_TIME, J({"topic": "orders"}), [("cluster", "get")]),
]


def guard_for(tmp_path, rules: list[tuple[str, str]], user: str = "app"):
    table = AclTable(tmp_path / "acl.json")
    table.add_user(User.make("app", "app-secret-1", iterations=4096))
    table.add_user(User.make("root", "root-secret-1", super_user=True, iterations=4096))
    for resource, action in rules:
        table.add_rule(Rule.make("app", resource, action))
    guard = Access(table, True).guard(("10.0.0.1", 5000))
    guard.user = user
    return table, guard


@pytest.mark.parametrize("op, body, needs", MATRIX, ids=[f"{m[0].name}-{i}"
                                                        for i, m in enumerate(MATRIX)])
def test_each_op_needs_exactly_its_permissions(tmp_path, op, body, needs):
    _table, allowed = guard_for(tmp_path / "a", needs)
    assert allowed.refusal(op, body) is None
    for missing in range(len(needs)):  # any one permission short: refused, saying which
        short = [n for i, n in enumerate(needs) if i != missing]
        _t, refused = guard_for(tmp_path / f"r{missing}", short)
        why = refused.refusal(op, body)
        assert why is not None and needs[missing][0] in why, why
    _t, unknown = guard_for(tmp_path / "u", needs, user="somebody")
    assert unknown.refusal(op, body) is not None


def test_nothing_before_the_handshake_and_the_acl_op_is_a_super_users(tmp_path):
    table, guard = guard_for(tmp_path, [("topic:orders", "pub")])
    guard.user = None
    assert "authenticate first" in guard.refusal(Op.SEND, SEND)
    guard.user = "app"
    assert "a super user's" in guard.refusal(Op.ACL, J({"action": "list"}))
    guard.user, guard._version = "root", -1
    assert guard.refusal(Op.ACL, J({"action": "list"})) is None
    assert guard.refusal(Op.SEND, p.encode_send("%TRACE%", -1, p.OutMessage(b"x"))) is None


def test_a_change_is_seen_on_the_next_request_and_a_removed_user_is_refused(tmp_path):
    table, guard = guard_for(tmp_path, [("topic:orders", "pub")])
    assert guard.refusal(Op.SEND, SEND) is None
    table.add_rule(Rule.make("app", "topic:orders", "pub", allow=False))
    assert "denied by rule" in guard.refusal(Op.SEND, SEND)
    table.remove_user("app")
    assert "was removed" in guard.refusal(Op.SEND, SEND)
    counts = {(d["user"], d["resource"]): d["count"] for d in guard.access.figures()["denied"]}
    assert counts == {("app", "topic:orders"): 1}
