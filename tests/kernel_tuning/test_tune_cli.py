"""`floodgate tune ...` end to end against fake root trees (console/commands/tune_cmd.py)."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from console.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


def test_show_plan_apply_verify_rollback(capsys, tree, state):
    root = tree.root
    code, out, _ = run(capsys, "tune", "show", "--root", root, "--device", "vda")
    assert code == 0
    assert "vm.swappiness" in out and "scheduler.vda" in out and "drift" in out
    code, out, _ = run(capsys, "tune", "plan", "--root", root, "--json")
    plan = json.loads(out)
    assert code == 0 and not plan["compliant"]
    assert {"name": "vm.swappiness", "current": "60", "target": "1"}.items() <= next(
        c for c in plan["changes"] if c["name"] == "vm.swappiness"
    ).items()
    assert any("--device or --data-dir" in n for n in plan["notes"])
    code, out, _ = run(capsys, "tune", "apply", "--root", root, "--dry-run")
    assert code == 0 and "dry run: nothing written" in out
    assert tree.sysctl_value("vm.swappiness") == "60\n"
    code, out, _ = run(capsys, "tune", "verify", "--root", root, "--json")
    assert code == 1 and json.loads(out)["compliant"] is False
    code, out, _ = run(capsys, "tune", "apply", "--root", root, "--state-dir", state)
    assert code == 0 and "applied" in out and "journal" in out
    code, out, _ = run(capsys, "tune", "verify", "--root", root, "--json")
    report = json.loads(out)
    assert code == 0 and report["compliant"] is True
    assert set(report["settings"][0]) >= {"name", "current", "target", "status"}
    assert {s["status"] for s in report["settings"]} <= {"ok", "unsupported"}
    code, out, _ = run(capsys, "tune", "apply", "--root", root, "--state-dir", state)
    assert code == 0 and "already compliant" in out
    code, out, _ = run(capsys, "tune", "rollback", "--root", root, "--state-dir", state, "--list")
    assert code == 0 and "applied" in out
    code, out, _ = run(capsys, "tune", "rollback", "--root", root, "--state-dir", state, "--json")
    assert code == 0 and json.loads(out)["mismatches"] == []
    assert tree.sysctl_value("vm.swappiness") == "60\n"


def test_persist_and_conflicts_exit_1(capsys, tree):
    tree.file("etc/sysctl.d/99-zz.conf", "vm.swappiness = 60\n")
    code, out, _ = run(capsys, "tune", "persist", "--root", tree.root, "--profile", "latency")
    assert code == 1
    assert "wrote" in out and "60-floodgate-latency.conf" in out
    assert "conflict: vm.swappiness = 60" in out and "overrides ours" in out
    assert "vm.dirty_ratio = 10" in tree.read("etc/sysctl.d/60-floodgate-latency.conf")


def test_bad_input_is_one_line_and_the_right_exit(capsys, tree, profile_dir):
    code, _, err = run(capsys, "tune", "plan", "--root", tree.root, "--profile", "nope")
    assert code == 2 and "unknown profile 'nope' (valid: base, broker, latency, throughput)" in err
    (profile_dir / "typo.toml").write_text('[thp]\n"enable" = { value = "never", reason = "r" }\n')
    code, _, err = run(capsys, "tune", "plan", "--root", tree.root, "--profile-dir", profile_dir,
                       "--profile", "typo")  # fmt: skip
    assert code == 1 and "unknown thp key 'enable' (valid: enabled, defrag)" in err
    code, _, err = run(capsys, "tune", "plan", "--root", tree.root, "--device", "sdq")
    assert code == 1 and "no block device 'sdq'" in err and err.count("\n") == 1
    code, _, err = run(capsys, "tune", "rollback", "--root", tree.root)
    assert code == 1 and "nothing to roll back" in err
    code, _, err = run(capsys, "tune", "numa-exec")
    assert code == 2 and "give the command after --" in err


def test_small_host_refuses_the_seed_values_without_force(capsys, tmp_path, make_tree, profile_dir):
    tree = make_tree(tmp_path / "root", mem_gib=4)
    (profile_dir / "seed.toml").write_text(
        '[sysctl]\n"vm.min_free_kbytes" = { value = "3145728", reason = "the Double-11 talk" }\n'
    )
    argv = ["tune", "plan", "--root", tree.root, "--profile-dir", profile_dir, "--profile", "seed"]
    code, _, err = run(capsys, *argv)
    assert code == 1 and "limit is 5%" in err and "--force" in err
    code, out, _ = run(capsys, *argv, "--force")
    assert code == 0 and "vm.min_free_kbytes: 67584 -> 3145728" in out


PR_SET_KEEPCAPS = 8
CAP_DAC_READ_SEARCH = 2
CAPABILITY_VERSION_3 = 0x20080522


def _keep_only_read_search() -> None:
    """After a uid change with PR_SET_KEEPCAPS: keep only CAP_DAC_READ_SEARCH, so
    the child reads the checkout wherever it lives (a `mktemp -d` is 0700) but
    writes like any unprivileged user. Through libc: the stdlib has no capset."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(1 << CAP_DAC_READ_SEARCH, 1 << CAP_DAC_READ_SEARCH, 0, 0, 0, 0)
    if libc.capset(header, data) != 0:  # (effective, permitted, inheritable) x 2 words
        raise OSError(ctypes.get_errno(), "capset")


def run_as_nobody(argv: list[str]) -> tuple[int, str]:
    """`main(argv)` in a forked child running as uid/gid 65534: exit code, stderr.

    In-process after fork rather than a new interpreter started as nobody, which
    could not even read the checkout's venv when the checkout sat in a directory
    only root can enter."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 99
        try:
            os.close(rfd)
            os.dup2(wfd, 2)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            _keep_only_read_search()
            code = main(argv)
            sys.stderr.flush()
        except BaseException as exc:  # noqa: BLE001 - reported through the pipe
            print(f"child failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            os._exit(code if isinstance(code, int) else 98)
    os.close(wfd)
    with os.fdopen(rfd) as pipe:
        err = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err


def test_not_root_names_the_settings_that_need_root(capsys, make_tree):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    top = Path(tempfile.mkdtemp(prefix="kt-nonroot-"))
    try:
        tree = make_tree(top / "root")
        for dirpath, _subdirs, _files in os.walk(top):
            os.chmod(dirpath, 0o755)  # readable by nobody, writable by root only
        argv = ["tune", "apply", "--root", str(tree.root), "--profile", "base"]
        code, err = run_as_nobody(argv)
        assert code == 1, err
        assert "need root to change: vm.max_map_count, thp.enabled" in err
        assert err.count("\n") == 1
        assert tree.sysctl_value("vm.max_map_count") == "65530\n"
    finally:
        shutil.rmtree(top)


def test_numa_exec_runs_the_child_interleaved():
    try:
        open("/proc/self/numa_maps").close()
    except OSError:
        pytest.skip("no /proc/self/numa_maps: kernel without NUMA support")
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", "tune", "numa-exec", "--", "cat", "/proc/self/numa_maps"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "interleave:" in out.stdout


def test_on_a_one_node_host_the_numa_policy_is_no_change_and_verify_can_pass(capsys, tree, state):
    tree.file("sys/devices/system/node/online", "0\n")  # one NUMA node
    root = tree.root
    code, out, _ = run(capsys, "tune", "plan", "--root", root, "--json")
    plan = json.loads(out)
    assert "numa.policy" not in {c["name"] for c in plan["changes"]}
    numa = next(s for s in plan["settings"] if s["name"] == "numa.policy")
    assert numa["status"] == "unsupported" and "one NUMA node here" in numa["note"]
    code, out, _ = run(capsys, "tune", "apply", "--root", root, "--state-dir", state)
    assert code == 0 and "numa.policy" not in out
    code, out, _ = run(capsys, "tune", "verify", "--root", root)
    assert code == 0 and out.rstrip().endswith("compliant")  # it could never pass before
    # two nodes: interleave is a change again
    tree.file("sys/devices/system/node/online", "0-1\n")
    code, out, _ = run(capsys, "tune", "plan", "--root", root, "--json")
    assert "numa.policy" in {c["name"] for c in json.loads(out)["changes"]}


def test_the_host_screen_shows_the_comparator_tune_show_shows(capsys, tree):
    from rich.console import Console

    from console.tui.panels import host_tuning
    from kernel_tuning import verify_profile

    code, out, _ = run(capsys, "tune", "show", "--root", tree.root)
    assert code == 0 and ">= 1048576" in out and ">= 655360" in out

    class State:
        host = {"tuning": verify_profile("broker", root=tree.root)}

    console = Console(width=200, record=True)
    console.print(host_tuning.render(State()))
    screen = console.export_text()
    for line in out.splitlines()[2:]:
        name, *_ = line.split()
        if name in ("fs.file-max", "fs.nr_open", "vm.max_map_count"):
            target = line.split(">= ")[1].split()[0]
            assert any(row.split()[:1] == [name] and f">= {target}" in row
                       for row in screen.splitlines()), name
