"""Users and their secrets, kept as SCRAM-SHA-256 keys (salt, StoredKey, ServerKey,
iterations: RFC 5802), never as the secret itself: a stolen table lets no one log
in, and the handshake proves the secret without sending it (acl.handshake).

scramp (a well-kept implementation of the RFCs) does the key derivation and the
exchange; this module only stores what it makes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from scramp import ScramMechanism

from broker_core.acl.rules import USER

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # RFC 7677's minimum: a handshake costs the broker ~2 ms of one core
MIN_SECRET = 8


@dataclass(frozen=True)
class User:
    name: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    super: bool = False

    @classmethod
    def make(cls, name: str, secret: str, super_user: bool = False,
             iterations: int = ITERATIONS) -> User:
        if not USER.fullmatch(name or ""):
            raise ValueError(f"a user name is 1-64 of letters, digits and _.-, not {name!r}")
        if len(secret or "") < MIN_SECRET:
            raise ValueError(f"a secret has at least {MIN_SECRET} characters")
        salt, stored, server, n = ScramMechanism(MECHANISM).make_auth_info(
            secret, iteration_count=iterations)
        return cls(name, salt, stored, server, n, super_user)

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        return self.salt, self.stored_key, self.server_key, self.iterations

    def to_dict(self) -> dict:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations,
                "super": self.super}

    @classmethod
    def from_dict(cls, name: str, doc: dict) -> User:
        d = base64.b64decode
        return cls(name, d(doc["salt"]), d(doc["stored_key"]), d(doc["server_key"]),
                   int(doc["iterations"]), bool(doc.get("super")))
