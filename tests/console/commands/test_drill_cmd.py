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


def test_the_report_reads_as_sentences_and_calls_out_one_copy_acks():
    """Rough edge 4: `acked 15000 {'SEND_OK': 10490, 'SLAVE_NOT_AVAILABLE': 4510}` (a
    Python dict), 30 % of acks on one copy said nowhere, the killed master left down with
    no hint."""
    from broker_core.cluster.drill import DrillResult
    from console.commands.drill_cmd import report_lines

    result = DrillResult("group-1", "group-1-a", "group-1-b", 1, 2, sent=15000, acked=15000,
                         acked_by_status={"SEND_OK": 10490, "SLAVE_NOT_AVAILABLE": 4510},
                         failover_s=1.234, rate=500.0)
    text = "\n".join(report_lines(result))
    assert "acked 15,000 (10,490 SEND_OK, 4,510 SLAVE_NOT_AVAILABLE)" in text
    assert "{" not in text
    assert "warning    4,510 acks (30%) were stored on one copy only" in text
    assert "group-1-a stays down: `floodgate cluster up --restart`" in text
    supervised = "\n".join(report_lines(result, restarts=True))  # `cluster up --restart`
    assert "stays down" not in supervised, supervised
    assert "the supervisor restarts group-1-a: it rejoins group-1 as a slave" in supervised
    assert "slave e2 once back" in supervised
    clean = DrillResult("group-1", "group-1-a", acked=10, acked_by_status={"SEND_OK": 10})
    assert "warning" not in "\n".join(report_lines(clean))


def test_a_raft_groups_drill_speaks_of_leaders_and_terms():
    from broker_core.cluster.drill import DrillResult
    from console.commands.drill_cmd import report_lines

    result = DrillResult("group-1", "group-1-a", "group-1-c", 3, 4, acked=10,
                         acked_by_status={"SEND_OK": 10}, failover_s=0.8, consensus="raft")
    text = "\n".join(report_lines(result, restarts=True))
    assert "leader group-1-a killed, group-1-c leader now (term 3 -> 4)" in text
    assert "rejoins group-1 as a follower (`floodgate status`: follower t4 once back)" in text
    assert "slave" not in text and "epoch" not in text
