"""Access control on the gRPC port of a broker with `--acl`: RocketMQ 5's request
signature, then the native port's rules (server.access, acl.rules).

A RocketMQ client signs every request: `authorization: MQv2-HMAC-SHA1 Credential=AK,
SignedHeaders=x-mq-date-time, Signature=HEX`, the HMAC-SHA1 of its `x-mq-date-time`
under the user's access secret. The broker checks it with the secret it keeps for a
user made with `--rocketmq` (acl.users) and refuses a date more than SKEW_S from its
clock (a recorded request is replayable that long: TLS keeps them from being read).
What each RPC then needs, as the native ops that do the same:

    SendMessage                          pub on each message's topic
    QueryRoute                           pub or sub on the topic
    ReceiveMessage, AckMessage,          sub on the topic and on the group
    ChangeInvisibleDuration,
    QueryAssignment,
    ForwardMessageToDeadLetterQueue
    EndTransaction                       pub on the topic
    Heartbeat, Telemetry,                a user who signed
    NotifyClientTermination

A refusal is the RPC's own answer with UNAUTHORIZED (no user, a bad signature) or
FORBIDDEN (the rule's reason), counted and logged as the native port's.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from broker_core.grpc_front import rocketmq_v2_pb2 as pb

SKEW_S = 15 * 60
AUTH = re.compile(r"MQv2-HMAC-SHA1 Credential=([^,]+), SignedHeaders=x-mq-date-time, "
                  r"Signature=([0-9a-fA-F]+)")


def _needs(rpc: str, req) -> list[tuple[str, str, tuple[str, ...]]]:
    if rpc == "SendMessage":
        return [("topic", m.topic.name, ("pub",)) for m in req.messages]
    if rpc == "QueryRoute":
        return [("topic", req.topic.name, ("pub", "sub"))]
    if rpc == "ReceiveMessage":
        return [("topic", req.message_queue.topic.name, ("sub",)),
                ("group", req.group.name, ("sub",))]
    if rpc in ("AckMessage", "ChangeInvisibleDuration", "QueryAssignment",
               "ForwardMessageToDeadLetterQueue"):
        return [("topic", req.topic.name, ("sub",)), ("group", req.group.name, ("sub",))]
    if rpc == "EndTransaction":
        return [("topic", req.topic.name, ("pub",))]
    return []


class GrpcAccess:
    def __init__(self, access, clock: Callable[[], float] = time.time) -> None:
        self.access, self.clock = access, clock

    def refusal(self, rpc: str, req, ctx) -> pb.Status | None:
        """None when the request may go on; else the status it is answered with."""
        access = self.access
        if access is None or not access.enforced:
            return None
        user, why = self._signer(dict(ctx.invocation_metadata() or ()))
        if user is None:
            access.auth_failures += 1
            return pb.Status(code=pb.UNAUTHORIZED, message=why)
        ip = _peer_ip(ctx.peer())
        rules = access.table.ruleset
        for kind, name, actions in _needs(rpc, req):
            decisions = [rules.decide(user, kind, name, a, ip) for a in actions]
            if not any(d.allowed for d in decisions):
                reason = decisions[0].why
                access.count_denial(user, actions[0], f"{kind}:{name}", reason)
                return pb.Status(code=pb.FORBIDDEN, message=reason)
        return None

    def _signer(self, meta: dict) -> tuple[str | None, str]:
        """The user who signed the request, or None and why not (one line, no key)."""
        found = AUTH.fullmatch(meta.get("authorization", ""))
        stamp = meta.get("x-mq-date-time", "")
        if found is None or not stamp:
            return None, ("sign requests: this broker takes users only (a RocketMQ client's "
                          "Credentials(access key, access secret))")
        name, signature = found.groups()
        try:
            signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            return None, f"x-mq-date-time {stamp[:32]!r} is not YYYYMMDDTHHMMSSZ"
        user = self.access.table.users.get(name)
        secret = user.rocketmq if user is not None else ""
        good = hmac.new(secret.encode(), stamp.encode(), hashlib.sha1).hexdigest()
        # (an unknown user, one without a RocketMQ secret and a wrong secret alike: the
        # answer names no user that exists)
        if not secret or not hmac.compare_digest(good, signature.lower()):
            return None, ("authentication failed (wrong access secret, or a user not made "
                          "with --rocketmq)")
        if abs(self._local_stamp_s(signed_at)) > SKEW_S:
            return None, f"a request signed at {stamp}: more than {SKEW_S // 60} min off"
        return name, ""

    def _local_stamp_s(self, signed_at: datetime) -> float:
        """How far the signature's date is from now. RocketMQ's Python client writes its
        local time with a Z; read both ways, the nearer counts."""
        as_utc = signed_at.timestamp() - self.clock()
        as_local = signed_at.replace(tzinfo=None).timestamp() - self.clock()
        return min(as_utc, as_local, key=abs)


def _peer_ip(peer: str | None):
    """gRPC's peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") as an address."""
    host = (peer or "").partition(":")[2].rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
