"""The ACL op (a super user's, server.access): list the users and rules, add or remove a
user (its SCRAM keys made by the client: the secret never reaches the broker), add or
remove a rule. A change is saved at once and takes effect on every connection's next
request (the table's version)."""

from __future__ import annotations

from broker_core import protocol as p
from broker_core.acl.rules import USER, Rule
from broker_core.acl.users import User
from broker_core.protocol import Code


async def acl(broker, body: bytes) -> tuple[int, bytes]:
    if not broker.access.enforced:
        return Code.NO_PERMISSION, (f"{broker.config.name} enforces no ACL: start its "
                                    f"brokers with --acl").encode()
    req = p.decode_json(body)
    action = req.get("action")
    table = broker.acl
    try:
        if action == "list":
            return Code.OK, p.encode_json(table.listing())
        if action == "add_user":
            name = str(req.get("name") or "")
            if not USER.fullmatch(name):
                raise ValueError(f"a user name is 1-64 of letters, digits and _.-, not {name!r}")
            user = User.from_dict(name, req["keys"])
            changed = True
            table.add_user(user)
        elif action == "remove_user":
            changed = table.remove_user(str(req.get("name") or ""))
        elif action in ("add_rule", "remove_rule"):
            rule = Rule.from_dict(req.get("rule") or {})
            if rule.user not in table.users:
                raise ValueError(f"no user {rule.user!r}: add it first")
            changed = table.add_rule(rule) if action == "add_rule" else table.remove_rule(rule)
        else:
            raise ValueError(f"action is list, add_user, remove_user, add_rule or "
                             f"remove_rule, not {action!r}")
    except (KeyError, TypeError) as exc:
        return broker.bad(f"malformed ACL request: {exc}")
    except ValueError as exc:
        return broker.bad(str(exc))
    if changed:
        table.save()
        broker.access.changed(action, str(req.get("name") or req.get("rule") or ""))
    return Code.OK, p.encode_json({"changed": changed, **table.listing()})
