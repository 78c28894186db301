"""`floodgate drill failover`: bad input is one line and the right exit code (the
drill itself runs against real processes in tests/integration/test_ha_failover.py)."""

import pytest

from console.cli import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_kill_after_must_come_before_the_end(capsys, tmp_path):
    code, err = run(capsys, "drill", "failover", "--cluster", str(tmp_path / "c.toml"),
                    "--duration", "5", "--kill-after", "9")
    assert code == 2 and "--kill-after (9) must be less than --duration (5)" in err


def test_missing_or_single_copy_cluster_is_refused(capsys, tmp_path):
    code, err = run(capsys, "drill", "failover", "--cluster", str(tmp_path / "none.toml"))
    assert code == 1 and "no such cluster file" in err
    plain = tmp_path / "cluster.toml"
    plain.write_text('name = "x"\n[[broker]]\nname = "b"\naddr = "127.0.0.1:1"\n'
                     'http = "127.0.0.1:2"\n')
    code, err = run(capsys, "drill", "failover", "--cluster", str(plain))
    assert code == 1 and "not replicated" in err and err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--rate", "--duration"])
def test_numbers_out_of_range(capsys, tmp_path, flag):
    code, err = run(capsys, "drill", "failover", "--cluster", str(tmp_path / "c"), flag, "-1")
    assert code == 2 and flag in err
