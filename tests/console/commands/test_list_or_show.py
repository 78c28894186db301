"""The spelling of the last command used works in the next: `list` and `show` wherever
one of them lists things (`topic list`, then `quota list`), `--user` wherever a user
is named, and the global flags after the subcommand as well as before it."""

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


@pytest.mark.parametrize("argv", [
    ["--tls-ca", "ca.pem", "--credentials", "me.toml", "--debug", "bench", "produce"],
    ["bench", "produce", "--tls-ca", "ca.pem", "--credentials", "me.toml", "--debug"],
    ["--debug", "bench", "--tls-ca", "ca.pem", "produce", "--credentials", "me.toml"],
])  # fmt: skip
def test_the_global_flags_are_taken_after_the_subcommand_too(argv):
    """A plain client closed by a TLS port says "give --tls-ca"; typed at the end of the
    command it was refused as an unrecognized argument."""
    args = build_parser().parse_args(argv + ["--brokers", "b:1", "--count", "1"])
    assert (args.tls_ca, args.credentials, args.debug) == ("ca.pem", "me.toml", True)


def test_a_subcommand_flag_of_the_same_name_keeps_its_meaning():
    args = build_parser().parse_args(["broker", "serve", "--name", "b", "--data", "d",
                                      "--tls-ca", "ca.pem"])
    assert str(args.tls_ca) == "ca.pem" and not isinstance(args.tls_ca, str)  # a Path
    args = build_parser().parse_args(["bench", "produce", "--brokers", "b:1", "--count", "1"])
    assert (args.tls_ca, args.credentials, args.debug) == (None, None, False)
