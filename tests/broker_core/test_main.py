"""`python -m broker_core`: a broker and a controller without the console, with the same
flags as `floodgate broker serve` and `floodgate controller`."""

from __future__ import annotations

import signal
import subprocess
import sys

from broker_core.cluster.health import wait_healthy
from broker_core.cluster.ports import free_port_range

NO_CONSOLE = """
import sys
import broker_core.__main__ as m
m.build_parser()
import broker_core.server.runner, broker_core.ha.controller, broker_core.cluster.roles
print(sorted({k.split('.')[0] for k in sys.modules} & {'console', 'spark_reports', 'capacity'}))
"""


def test_a_broker_and_a_controller_load_nothing_of_the_console():
    out = subprocess.run([sys.executable, "-c", NO_CONSOLE], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_bad_flags_are_refused_as_floodgate_refuses_them(tmp_path):
    got = subprocess.run([sys.executable, "-m", "broker_core", "broker", "--name", "b",
                          "--data", str(tmp_path / "b"), "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 2 and got.stderr.count("\n") == 1
    assert "--port must be within [1, 65535], got 0" in got.stderr
    assert not (tmp_path / "b").exists()


def test_a_broker_serves_and_stops_on_sigterm(tmp_path):
    port = free_port_range(2)
    proc = subprocess.Popen([sys.executable, "-m", "broker_core", "broker", "--name", "b1",
                             "--data", str(tmp_path / "b1"), "--port", str(port),
                             "--http-port", str(port + 1), "--segment-size", "16M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(f"127.0.0.1:{port + 1}", timeout=30, proc=proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert (tmp_path / "b1" / "store").is_dir()
