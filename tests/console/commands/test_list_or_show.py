"""The spelling of the last command used works in the next: `list` and `show` wherever
one of them lists things (`topic list`, then `quota list`), and `--user` wherever a
user is named."""

from __future__ import annotations

import pytest

from console.cli import build_parser


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [("quota list", "quota show"), ("offsets list --group g", "offsets show --group g"),
     ("fault list --broker 127.0.0.1:1", "fault show --broker 127.0.0.1:1"),
     ("topic show", "topic list"), ("tx show", "tx list")],
)  # fmt: skip
def test_either_verb_runs_the_same_command(typed, canonical):
    parser = build_parser()
    extra = ["--cluster", "c.toml"] if not typed.startswith("fault") else []
    a = parser.parse_args(typed.split() + extra)
    b = parser.parse_args(canonical.split() + extra)
    assert a.func is b.func and a.func is not None


@pytest.mark.parametrize("action", ["add", "remove"])
def test_a_user_is_named_by_user_as_allow_and_deny_name_it(action):
    """`acl allow --user app1` and then `acl user add --user app1` read: "required: --name"."""
    parser = build_parser()
    for flag in ("--user", "--name"):
        args = parser.parse_args(["acl", "user", action, "--cluster", "c.toml", flag, "app1"])
        assert args.name == "app1"
