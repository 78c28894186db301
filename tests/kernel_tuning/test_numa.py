import subprocess
import sys

import pytest

from kernel_tuning.errors import TuningError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.numa import interleave_command, online_nodes, parse_node_list


def test_node_lists():
    assert parse_node_list("0\n") == [0]
    assert parse_node_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]


def test_online_nodes_from_the_tree(tree):
    assert online_nodes(HostFS(tree.root)) == [0, 1]


def test_interleave_command_wraps_the_argv():
    argv = interleave_command(["java", "-jar", "broker.jar"])
    assert argv[-3:] == ["java", "-jar", "broker.jar"]
    assert argv[0].endswith("numactl") and argv[1] == "--interleave=all" or argv[1:4] == [
        "-m", "kernel_tuning.numa_exec", "--",
    ]  # fmt: skip
    with pytest.raises(TuningError, match="no command"):
        interleave_command([])


def test_child_runs_interleaved():
    try:
        open("/proc/self/numa_maps").close()
    except OSError:
        pytest.skip("no /proc/self/numa_maps: kernel without NUMA support")
    out = subprocess.run(
        interleave_command(["cat", "/proc/self/numa_maps"]), capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert "interleave:" in out.stdout


def test_missing_command_fails_cleanly():
    out = subprocess.run(
        [sys.executable, "-m", "kernel_tuning.numa_exec", "--", "/nonexistent/cmd"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 127 and "cannot run" in out.stderr


def test_set_mempolicy_path_without_numactl():
    """The ctypes path, whether or not numactl is installed here."""
    try:
        open("/proc/self/numa_maps").close()
    except OSError:
        pytest.skip("no /proc/self/numa_maps: kernel without NUMA support")
    code = (
        "import os; from kernel_tuning.numa import set_interleave; set_interleave(); "
        "os.execvp('cat', ['cat', '/proc/self/numa_maps'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "interleave:0" in out.stdout
