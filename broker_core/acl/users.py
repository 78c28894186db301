"""Users and their secrets, kept as SCRAM-SHA-256 keys (salt, StoredKey, ServerKey,
iterations: RFC 5802), never as the secret itself: a stolen table lets no one log
in, and the handshake proves the secret without sending it (acl.handshake).

A user may also sign RocketMQ 5's gRPC requests (grpc_front.access): RocketMQ's
clients sign with HMAC-SHA1 under an access secret the broker must hold to check, as
RocketMQ's own ACL holds it. That secret is derived from the user's (`rocketmq_secret`)
and kept only for users made with it (`floodgate acl user add --rocketmq`): for those,
a stolen table lets one sign gRPC requests, never log in on the native port.

scramp (a well-kept implementation of the RFCs) does the key derivation and the
exchange; this module only stores what it makes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field

from scramp import ScramMechanism

from broker_core.acl.rules import USER

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # RFC 7677's minimum: a handshake costs the broker ~2 ms of one core
MIN_SECRET = 8
ROCKETMQ_LABEL = b"floodgate rocketmq-v2 access secret"


def rocketmq_secret(secret: str) -> str:
    """The access secret a RocketMQ client signs with for the user of `secret`."""
    mac = hmac.new(secret.encode(), ROCKETMQ_LABEL, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


@dataclass(frozen=True)
class User:
    name: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    super: bool = False
    # the RocketMQ access secret, for a user made with one (never in a repr or a log)
    rocketmq: str = field(default="", repr=False)

    @classmethod
    def make(cls, name: str, secret: str, super_user: bool = False,
             iterations: int = ITERATIONS, rocketmq: bool = False) -> User:
        if not USER.fullmatch(name or ""):
            raise ValueError(f"a user name is 1-64 of letters, digits and _.-, not {name!r}")
        if len(secret or "") < MIN_SECRET:
            raise ValueError(f"a secret has at least {MIN_SECRET} characters")
        salt, stored, server, n = ScramMechanism(MECHANISM).make_auth_info(
            secret, iteration_count=iterations)
        return cls(name, salt, stored, server, n, super_user,
                   rocketmq_secret(secret) if rocketmq else "")

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        return self.salt, self.stored_key, self.server_key, self.iterations

    def to_dict(self) -> dict:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations,
                "super": self.super, **({"rocketmq": self.rocketmq} if self.rocketmq else {})}

    @classmethod
    def from_dict(cls, name: str, doc: dict) -> User:
        d = base64.b64decode
        return cls(name, d(doc["salt"]), d(doc["stored_key"]), d(doc["server_key"]),
                   int(doc["iterations"]), bool(doc.get("super")), str(doc.get("rocketmq", "")))
