"""`list` and `show` both work wherever one of them lists things: an operator at
midnight types the verb of the last command used (`topic list`, then `quota list`)."""

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
