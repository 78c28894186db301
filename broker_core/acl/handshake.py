"""The data port's authentication: one SCRAM-SHA-256 exchange per connection (RFC 5802,
7677), so no secret crosses the wire and a recorded exchange cannot be replayed (each
side adds a nonce); after it, each request costs only a permission lookup.

    client                         broker
    AUTH_START  {first}       ->   {first}        (user, client nonce -> salt, iterations,
                                                    the combined nonce)
    AUTH_FINISH {final}       ->   {final, user}   (the client's proof -> the broker's,
                                                    which the client checks in turn)

A wrong secret, an unknown user (not told apart: that would name the users), a
replayed or garbled message: NO_PERMISSION, and the broker closes the connection.
"""

from __future__ import annotations

from collections.abc import Callable

from scramp import ScramClient, ScramException, ScramMechanism

from broker_core.acl.users import MECHANISM, User
from broker_core.errors import BrokerError


class AuthFailed(BrokerError):
    """The handshake failed: the reason is one line (never the secret)."""


class ServerHandshake:
    """One connection's exchange on the broker; `user_of(name)` looks a user up."""

    def __init__(self, user_of: Callable[[str], User | None]) -> None:
        self._user_of = user_of
        self._server = ScramMechanism(MECHANISM).make_server(self._auth_info)
        self.user: str | None = None
        self._name = ""  # who the client says it is (authenticated once its proof holds)
        self._started = False

    def _auth_info(self, name: str):
        user = self._user_of(name)
        if user is None:
            raise ScramException("unknown user")
        self._name = name
        return user.auth_info()

    def first(self, client_first: str) -> str:
        if self._started:
            raise AuthFailed("authentication already started on this connection")
        self._started = True
        try:
            self._server.set_client_first(client_first)
            return self._server.get_server_first()
        except ScramException:
            raise AuthFailed("authentication failed (unknown user, or a bad first "
                             "message)") from None

    def final(self, client_final: str) -> tuple[str, str]:
        """(the broker's final message, the authenticated user)."""
        if not self._started or self.user is not None:
            raise AuthFailed("AUTH_FINISH out of turn")
        try:
            self._server.set_client_final(client_final)
            out = self._server.get_server_final()
        except ScramException:
            raise AuthFailed("authentication failed (wrong secret, or a replayed or "
                             "garbled message)") from None
        self.user = self._name
        return out, self.user


def handshake_steps(user: str, secret: str):
    """The client's side as steps, for a blocking and an asyncio driver alike: yields
    (op, payload) and is sent (code, answer: a dict when OK, else the broker's reason).
    Raises AuthFailed with the broker's reason (or when the broker's own proof is wrong:
    it does not hold this user's keys)."""
    from broker_core.protocol import Code, Op

    client = ScramClient([MECHANISM], user, secret)
    code, answer = yield Op.AUTH_START, {"mechanism": MECHANISM,
                                         "first": client.get_client_first()}
    if code != Code.OK:
        raise AuthFailed(f"user {user}: {answer}")
    try:
        client.set_server_first(answer["first"])
        final = client.get_client_final()
    except (ScramException, KeyError, TypeError) as exc:
        raise AuthFailed(f"user {user}: the broker's first message: {exc}") from None
    code, answer = yield Op.AUTH_FINISH, {"final": final}
    if code != Code.OK:
        raise AuthFailed(f"user {user}: {answer}")
    try:
        client.set_server_final(answer["final"])
    except (ScramException, KeyError, TypeError):
        raise AuthFailed(f"user {user}: the broker could not prove it knows the user's "
                         f"keys: not the broker configured") from None


def client_handshake(call: Callable[[int, dict], tuple[int, dict | str]], user: str,
                     secret: str) -> None:
    """Authenticate a connection; `call(op, payload) -> (code, answer)` sends one request."""
    steps = handshake_steps(user, secret)
    request = next(steps)
    try:
        while True:
            request = steps.send(call(*request))
    except StopIteration:
        return


async def client_handshake_async(call, user: str, secret: str) -> None:
    """The same with `await call(op, payload)`."""
    steps = handshake_steps(user, secret)
    request = next(steps)
    try:
        while True:
            request = steps.send(await call(*request))
    except StopIteration:
        return
