"""The SCRAM-SHA-256 handshake between a client and a broker's ServerHandshake: the right
secret authenticates (and the client checks the broker's proof), a wrong secret or an
unknown user fails alike, a recorded final message replayed on a new connection fails
(the broker's nonce is new), garbage fails; credentials files open to others are refused."""

from __future__ import annotations

import os

import pytest

from broker_core.acl.credentials import Credentials, load, write
from broker_core.acl.handshake import AuthFailed, ServerHandshake, client_handshake
from broker_core.acl.users import User
from broker_core.protocol import Code, Op

USERS = {"app": User.make("app", "app-secret-1", iterations=4096)}


def wire(server: ServerHandshake, log: list | None = None):
    """A client's `call` straight into a server handshake (as the broker's TCP side)."""
    def call(op, payload):
        try:
            if op == Op.AUTH_START:
                return Code.OK, {"first": server.first(payload["first"])}
            if log is not None:
                log.append(payload["final"])
            final, _user = server.final(payload["final"])
            return Code.OK, {"final": final}
        except AuthFailed as exc:
            return Code.NO_PERMISSION, str(exc)
    return call


def test_the_right_secret_authenticates():
    server = ServerHandshake(USERS.get)
    client_handshake(wire(server), "app", "app-secret-1")
    assert server.user == "app"


@pytest.mark.parametrize("user, secret", [("app", "wrong-secret"), ("nobody", "app-secret-1")])
def test_a_wrong_secret_and_an_unknown_user_fail_alike(user, secret):
    server = ServerHandshake(USERS.get)
    with pytest.raises(AuthFailed, match="authentication failed") as exc:
        client_handshake(wire(server), user, secret)
    assert secret not in str(exc.value) and server.user is None


def test_a_replayed_final_message_fails():
    recorded: list[str] = []
    client_handshake(wire(ServerHandshake(USERS.get), recorded), "app", "app-secret-1")
    server = ServerHandshake(USERS.get)
    from scramp import ScramClient

    server.first(ScramClient(["SCRAM-SHA-256"], "app", "x").get_client_first())
    with pytest.raises(AuthFailed):
        server.final(recorded[0])
    assert server.user is None


def test_garbage_and_out_of_turn_messages_fail():
    server = ServerHandshake(USERS.get)
    with pytest.raises(AuthFailed):
        server.final("c=biws,r=abc,p=xyz")  # before any first message
    with pytest.raises(AuthFailed):
        ServerHandshake(USERS.get).first("\x00garbage")


def test_credentials_files_are_the_owners_only(tmp_path):
    path = write(tmp_path / "app.toml", Credentials("app", "app-secret-1"))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert load(path) == Credentials("app", "app-secret-1")
    assert "app-secret-1" not in repr(load(path))
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="readable by others"):
        load(path)
    (tmp_path / "bad.toml").write_text("user = 1\n")
    os.chmod(tmp_path / "bad.toml", 0o600)
    with pytest.raises(ValueError, match="need user"):
        load(tmp_path / "bad.toml")
