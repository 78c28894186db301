"""The HA flags of `broker serve`, `cluster up` and `controller`: refused by name, exit 2,
before anything starts."""

import pytest

from console.cli import main


@pytest.mark.parametrize("argv, message", [
    (["broker", "serve", "--name", "b", "--data", "D", "--group", "g"],
     "--group needs --zk HOST:PORT and --ha-port"),
    (["broker", "serve", "--name", "b", "--data", "D", "--zk", "h:1"], "--zk need --group"),
    (["broker", "serve", "--name", "b", "--data", "D", "--group", "g", "--zk", "nohost",
      "--ha-port", "9"], "bad ZooKeeper address"),
    (["broker", "serve", "--name", "b", "--data", "D", "--group", "g", "--zk", "h:1",
      "--ha-port", "10911"], "--ha-port 10911 must be a free port other than"),
    (["broker", "serve", "--name", "b", "--data", "D", "--max-mapped-queues", "5"],
     "--max-mapped-queues must be 0 (no limit) or at least 64"),
    (["cluster", "up", "--groups", "2", "--brokers", "3"], "exclude each other"),
    (["cluster", "up", "--zk", "h:1"], "--zk needs --groups"),
    (["cluster", "up", "--groups", "2", "--replicas", "9"], "--replicas must be within [1, 5]"),
    (["controller", "--zk", "h:1", "--session-timeout", "0.01"],
     "--session-timeout must be within [0.2, 60]"),
    (["controller", "--zk", "h:x"], "bad ZooKeeper address"),
    (["cluster", "up", "--groups", "2", "--fuse-moves-leaders"],
     "--fuse-moves-leaders is for --consensus raft"),
    (["broker", "serve", "--name", "b", "--data", "D", "--fuse-moves-leader", "0"],
     "--fuse-moves-leader must be within [0.5, 3600]"),
])
def test_refused_by_name(capsys, tmp_path, argv, message):
    argv = [str(tmp_path) if a == "D" else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_serve_on_a_port_in_use_opens_nothing(tmp_path, capsys):
    """Rough edge 3: `broker serve` on a port in use exited 1 after opening the store and
    leaving `store/abort`, so the next start recovered as after a crash; and (issue 59)
    it left the --data directory it had made, empty."""
    from tests.ports import a_port_taken

    with a_port_taken(2, 1) as port:
        code = main(["broker", "serve", "--name", "b", "--data", str(tmp_path / "new" / "b"),
                     "--port", str(port), "--http-port", str(port + 1)])
    err = capsys.readouterr().err
    assert code == 1 and f"HTTP port {port + 1} in use" in err and err.count("\n") == 1
    assert not (tmp_path / "new").exists()
