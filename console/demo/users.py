"""The demo's users (its cluster runs with the ACL on): one per client, each allowed what
its job needs and nothing more, so the demo exercises the ACL on every request. The
demo process itself (its console, its faults) acts as `admin`, whose credentials
`cluster up --acl` wrote beside the cluster file.

Credentials files go to `<data>/users/<name>.toml` (mode 0600).
"""

from __future__ import annotations

import secrets
from pathlib import Path

TRACE = "topic:%TRACE%"

# user -> (resource, actions) it is allowed
USERS: dict[str, tuple[tuple[str, str], ...]] = {
    "producer": (("topic:demo", "pub"), (TRACE, "pub")),
    "billing": (("topic:demo", "sub"), ("topic:%RETRY%billing", "sub"),
                ("group:billing", "sub"), (TRACE, "pub")),
    "warehouse": (("topic:demo", "sub"), ("topic:%RETRY%warehouse", "pub,sub"),
                  ("topic:%DLQ%warehouse", "pub"), ("group:warehouse", "sub"), (TRACE, "pub")),
    "batch": (("topic:demo-batch", "pub"),),
    "payments": (("topic:demo-paid", "pub"), ("group:payments", "pub")),
    "ledger": (("topic:demo-paid", "sub"), ("topic:demo-ledger", "pub"),
               ("group:ledger", "pub,sub")),
    "console": (("cluster", "get,list"),),
    # a RocketMQ application on the gRPC ports (console.demo.rocketmq_clients)
    "rocketmq": (("topic:demo-rmq", "pub,sub"), ("group:rmq-audit", "sub")),
}


def make_users(cluster_path: Path, admin_credentials: Path, out: Path) -> dict[str, Path]:
    """Create the users and their rules on every broker (as admin); name -> its
    credentials file."""
    from broker_core.acl.credentials import Credentials, load, write
    from broker_core.acl.rules import Rule
    from broker_core.acl.users import User
    from broker_core.client.connection import Connection
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.errors import BrokerError
    from broker_core.protocol import Code, Op, encode_json

    out.mkdir(parents=True, exist_ok=True)
    admin = load(admin_credentials)
    made = {name: (User.make(name, secret := secrets.token_urlsafe(18),
                             rocketmq=name == "rocketmq"), secret)
            for name in USERS}
    requests = [{"action": "add_user", "name": name, "keys": user.to_dict()}
                for name, (user, _s) in made.items()]
    requests += [{"action": "add_rule", "rule": Rule.make(name, res, actions).to_dict()}
                 for name, rules in USERS.items() for res, actions in rules]
    for b in load_cluster(cluster_path).brokers:
        conn = Connection(b.addr, credentials=admin)
        try:
            for req in requests:
                code, body = conn.call(Op.ACL, encode_json(req), 5.0)
                if code != Code.OK:
                    raise BrokerError(f"{b.name}: {Code(code).name}: {body.decode()}")
        finally:
            conn.close()
    return {name: write(out / f"{name}.toml", Credentials(name, secret))
            for name, (_u, secret) in made.items()}
