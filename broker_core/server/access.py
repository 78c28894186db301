"""The broker's access control on its data port (`--acl`): each connection authenticates
once (acl.handshake), then every request is checked against the ACL's rules
(acl.rules) before anything is read, stored or returned; a refusal is answered
NO_PERMISSION with the one-line reason, counted per user x action x resource
(`floodgate_acl_denied_total`) and logged at most once a second per user.

What each op needs (the resource named in its body):

    SEND, SEND_BATCH, SEND_MULTI        pub on the topic
    PULL, QUERY_OFFSET, COMMIT_OFFSET,  sub on the topic and on the group (a
    HEARTBEAT, LOCK_BATCH, UNLOCK_BATCH HEARTBEAT's `also` topics: sub on each)
    ROUTE                               pub or sub on the topic
    END_TRANSACTION, CHECK_TRANSACTION  pub on the producer group (an operator's
                                        resolve: update on cluster)
    STATS, HA_STATE, lookups            get on cluster
    LIST_TRANSACTIONS                   list on cluster
    STEP_ASIDE                          any user (raft.step_aside bounds it)
    ACL                                 a super user

Decisions are cached per connection and dropped when the ACL changes (its version).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import deque

from broker_core import protocol as p
from broker_core.acl.handshake import AuthFailed, ServerHandshake
from broker_core.protocol import Code, Op
from broker_core.server.acl_table import AclTable

log = logging.getLogger("floodgate.broker")

SUB_OPS = frozenset({Op.QUERY_OFFSET, Op.COMMIT_OFFSET, Op.HEARTBEAT, Op.LOCK_BATCH,
                     Op.UNLOCK_BATCH})
CLUSTER_GET = frozenset({Op.STATS, Op.HA_STATE, Op.QUERY_BY_KEY, Op.VIEW_BY_ID,
                         Op.QUERY_BY_TIME})
LOG_EVERY_S = 1.0
RECENT_S = 10.0
RECENT_MAX = 10_000
NO_USER = ("authenticate first: this broker takes users only (give --credentials FILE or "
           "set FLOODGATE_CREDENTIALS)")


def _str16(body: bytes, pos: int) -> tuple[str, int]:
    n = int.from_bytes(body[pos:pos + 2], "big")
    return body[pos + 2:pos + 2 + n].decode("utf-8", "replace"), pos + 2 + n


class Access:
    """One broker's: the ACL table, whether it is enforced, and the denial counts."""

    def __init__(self, table: AclTable, enforced: bool) -> None:
        self.table, self.enforced = table, enforced
        self.denied: dict[tuple[str, str, str], int] = {}
        self.auth_failures = 0
        self.changes = 0  # users and rules added or removed (an operator's `floodgate acl`)
        self._logged: dict[str, float] = {}
        self._recent: deque[float] = deque(maxlen=RECENT_MAX)  # when, of the last denials

    def guard(self, peer) -> ConnectionGuard | None:
        return ConnectionGuard(self, peer) if self.enforced else None

    def count_denial(self, user: str, action: str, resource: str, why: str) -> None:
        key = (user, action, resource)
        self.denied[key] = self.denied.get(key, 0) + 1
        now = time.monotonic()
        self._recent.append(now)
        if now - self._logged.get(user, 0.0) >= LOG_EVERY_S:
            self._logged[user] = now
            log.warning("acl denied: %s", why)

    def changed(self, action: str, what: str) -> None:
        """An ACL change: counted and logged (names and rules only, never a key)."""
        self.changes += 1
        log.warning("acl change: %s %s (version %d)", action, what, self.table.version)

    def denied_recently(self) -> int:
        """Denials in the last RECENT_S (the console's burst alert)."""
        cutoff = time.monotonic() - RECENT_S
        return sum(1 for t in self._recent if t >= cutoff)

    def figures(self) -> dict:
        return {"enforced": self.enforced, "version": self.table.version,
                "denied_10s": self.denied_recently(),
                "users": len(self.table.users), "rules": len(self.table.rules),
                "auth_failures_total": self.auth_failures, "changes_total": self.changes,
                "denied": [{"user": u, "action": a, "resource": r, "count": n}
                           for (u, a, r), n in sorted(self.denied.items())]}


class ConnectionGuard:
    def __init__(self, access: Access, peer) -> None:
        self.access = access
        self.user: str | None = None
        self.super = False
        try:
            self.ip = ipaddress.ip_address(peer[0]) if peer else None
        except ValueError:
            self.ip = None
        self._handshake: ServerHandshake | None = None
        # the op and its names -> None (allowed) or (why, action, resource) refused
        self._cache: dict[tuple, tuple[str, str, str] | None] = {}
        self._version = -1

    # -- the handshake --------------------------------------------------------------------
    def authenticate(self, op: int, body: bytes) -> tuple[int, bytes, bool]:
        """(code, answer, close the connection) for AUTH_START / AUTH_FINISH."""
        table = self.access.table
        try:
            req = p.decode_json(body)
            if op == Op.AUTH_START:
                if self.user is not None or self._handshake is not None:
                    raise AuthFailed("this connection is authenticated already")
                if req.get("mechanism") != "SCRAM-SHA-256":
                    raise AuthFailed(f"mechanism {req.get('mechanism')!r} not offered: "
                                     f"SCRAM-SHA-256")
                self._handshake = ServerHandshake(table.users.get)
                first = self._handshake.first(str(req.get("first", "")))
                return Code.OK, p.encode_json({"first": first}), False
            if self._handshake is None:
                raise AuthFailed("AUTH_FINISH before AUTH_START")
            final, user = self._handshake.final(str(req.get("final", "")))
        except (AuthFailed, p.ProtocolError) as exc:
            self.access.auth_failures += 1
            return Code.NO_PERMISSION, str(exc).encode(), True
        self.user, self._handshake = user, None
        self.super = bool(getattr(table.users.get(user), "super", False))
        return Code.OK, p.encode_json({"final": final, "user": user}), False

    # -- every other request --------------------------------------------------------------
    def refusal(self, op: int, body: bytes) -> str | None:
        """Why this request is refused, or None."""
        if self.user is None:
            return NO_USER
        table = self.access.table
        if self._version != table.version:  # a change: decisions made afresh
            self._cache.clear()
            self._version = table.version
            self.super = bool(getattr(table.users.get(self.user), "super", False))
            if self.user not in table.users:
                return f"user {self.user} was removed: reconnect as another"
        if self.super:
            return None
        try:
            key = self._key(op, body)
        except (p.ProtocolError, ValueError, UnicodeDecodeError, IndexError):
            return None  # malformed: the op itself answers BAD_REQUEST, nothing done
        if key in self._cache:
            refused = self._cache[key]
        else:
            refused = self._cache[key] = self._decide(key)
        if refused is None:
            return None
        why, action, resource = refused
        self.access.count_denial(self.user, action, resource, why)
        return why

    def _key(self, op: int, body: bytes) -> tuple:
        """What the decision depends on: the op and the names in its body."""
        if op in (Op.SEND, Op.SEND_BATCH, Op.SEND_MULTI):
            return (op, _str16(body, 0)[0])
        if op == Op.PULL:
            group, pos = _str16(body, 0)
            return (op, _str16(body, pos)[0], group)
        if op in SUB_OPS or op in (Op.ROUTE, Op.END_TRANSACTION, Op.CHECK_TRANSACTION):
            req = p.decode_json(body)
            also = req.get("also") if op == Op.HEARTBEAT else None  # more topics, one beat
            return (op, str(req.get("topic") or ""), str(req.get("group") or ""),
                    req.get("by") == "operator",
                    tuple(str(t) for t in also) if isinstance(also, list) else ())
        return (op,)

    def _decide(self, key: tuple) -> tuple[str, str, str] | None:
        op = key[0]
        if op in (Op.SEND, Op.SEND_BATCH, Op.SEND_MULTI):
            needs = [("topic", key[1], ("pub",))]
        elif op == Op.PULL or op in SUB_OPS:
            needs = [("topic", key[1], ("sub",)), ("group", key[2], ("sub",))]
            needs += [("topic", t, ("sub",)) for t in (key[4] if len(key) > 4 else ())]
        elif op == Op.ROUTE:
            needs = [("topic", key[1], ("pub", "sub"))]
        elif op == Op.END_TRANSACTION and key[3]:
            needs = [("cluster", "", ("update",))]
        elif op in (Op.END_TRANSACTION, Op.CHECK_TRANSACTION):
            needs = [("group", key[2], ("pub",))]
        elif op in CLUSTER_GET:
            needs = [("cluster", "", ("get",))]
        elif op == Op.LIST_TRANSACTIONS:
            needs = [("cluster", "", ("list",))]
        elif op == Op.STEP_ASIDE:  # any user's fuse may say so: the operator allowed the
            needs = []  # move when starting the group, and it happens once a minute at most
        else:  # ACL and anything new: a super user's
            return (f"user {self.user} may not use op {Op(op).name}: a super user's",
                    "admin", "cluster")
        rules = self.access.table.ruleset
        for kind, name, actions in needs:
            decisions = [rules.decide(self.user, kind, name, a, self.ip) for a in actions]
            if not any(d.allowed for d in decisions):
                return decisions[0].why, actions[0], f"{kind}:{name}" if name else kind
        return None


def no_permission(op: int, rid: int, why: str) -> bytes:
    return p.encode_answer(op, rid, Code.NO_PERMISSION, why.encode())
