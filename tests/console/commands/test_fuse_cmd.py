"""`floodgate fuse simulate` end to end through the CLI entry point."""

from __future__ import annotations

import json

from console.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


SMALL = ("--seconds", "10", "--rate", "500", "--seed", "3")


def test_simulate_one_cell_as_json(capsys):
    code, out, _ = run(capsys, "fuse", "simulate", "--scenario", "outage", "--policy", "fuse",
                       *SMALL, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["scenario"] == "outage" and data["policy"] == "fuse"
    assert 0.0 <= data["share_over_20ms"] <= 1.0
    assert {"avg_rt_ms", "p999_ms", "failed", "max_excluded"} <= data.keys()


def test_simulate_is_deterministic_and_lists_many_cells(capsys):
    args = ("fuse", "simulate", "--scenario", "pagecache-stall,outage", "--policy", "all",
            *SMALL, "--json")
    _, first, _ = run(capsys, *args)
    _, second, _ = run(capsys, *args)
    assert first == second
    assert len(json.loads(first)) == 8


def test_simulate_prints_a_table(capsys):
    code, out, _ = run(capsys, "fuse", "simulate", "--scenario", "erroring", "--policy",
                       "none,fuse", *SMALL)
    assert code == 0 and "erroring" in out and "max excluded" in out


def test_bad_usage_exits_2_with_one_line(capsys):
    code, _, err = run(capsys, "fuse", "simulate", "--scenario", "meteor", "--policy", "fuse")
    assert code == 2 and "meteor" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "fuse", "simulate", "--scenario", "outage", "--policy", "fuse",
                       "--seconds", "1e9")
    assert code == 2 and "sends" in err


def test_set_tunes_the_fuse_policy_and_bad_settings_exit_2(capsys):
    base = ("fuse", "simulate", "--scenario", "flapping", "--policy", "fuse", *SMALL, "--json")
    code, tuned, _ = run(capsys, *base, "--set", "slow_calls=1", "--set", "jitter_ratio=0")
    assert code == 0 and json.loads(tuned)["policy"] == "fuse"
    for bad in ("nope=1", "backoff=x", "backoff=20", "novalue"):
        code, _, err = run(capsys, *base, "--set", bad)
        assert code == 2 and len(err.strip().splitlines()) == 1
