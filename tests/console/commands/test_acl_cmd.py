"""`floodgate acl user list` prints what its help says, the users' names (the ACL itself
end to end: tests/integration/test_acl.py)."""

from __future__ import annotations

import json

import pytest

from console.cli import main
from console.commands import acl_cmd

ANSWER = {"version": 4,
          "users": [{"name": "admin", "super": True}, {"name": "app", "super": False}],
          "rules": [{"user": "app", "resource": "topic:paid", "actions": ["pub"],
                     "effect": "allow", "source": None},
                    {"user": "app", "resource": "group:billing", "actions": ["sub"],
                     "effect": "allow", "source": None}]}  # fmt: skip


@pytest.fixture
def acl(monkeypatch, tmp_path, capsys):
    """`floodgate acl ...` against brokers that answer ANSWER; (exit code, stdout)."""
    monkeypatch.setattr(acl_cmd, "_call_all", lambda args, payload: ANSWER)

    def run(*argv: str) -> tuple[int, str]:
        code = main(["acl", *argv, "--cluster", str(tmp_path / "cluster.toml")])
        return code, capsys.readouterr().out

    return run


def test_user_list_prints_names_only(acl):
    """Issue 59: it printed `acl list`'s users and every rule."""
    assert acl("user", "list") == (0, "admin\napp\n")


def test_user_list_says_more_when_asked(acl):
    code, out = acl("user", "list", "--long")
    assert code == 0 and out.splitlines() == ["admin  super  0 rule(s)", "app  user  2 rule(s)"]
    code, out = acl("user", "list", "--json")
    assert code == 0 and json.loads(out) == {"users": ANSWER["users"]}


def test_acl_list_still_shows_the_rules(acl):
    code, out = acl("list")
    assert code == 0 and "user app" in out and "topic:paid" in out
