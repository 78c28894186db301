"""kernel_tuning against the real kernel: /proc/sys, THP, a loop device's scheduler.

Run as root on a throwaway machine; skipped with the reason otherwise. Every
knob and file the tests may touch is saved first and written back in a
`finally`, independently of the engine under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernel_tuning.engine import apply_plan, rollback
from kernel_tuning.errors import ApplyError, HostError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.persist import persist_plan, sysctl_conf_path
from kernel_tuning.plan import build_plan
from kernel_tuning.plugins.base import parse_choice
from kernel_tuning.plugins.servicefiles import DROPIN, LIMITS_FILE
from kernel_tuning.plugins.sysctl import sysctl_path
from kernel_tuning.profile import load_profile

# one worker at a time: these tests write the host's own sysctls (vm.swappiness and the
# rest), and two of them at once under `make test` read each other's values back (one
# test read 7, another's, where it had restored 1)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("live-kernel")]

THP = ["sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag"]
EXTRA_KEYS = ["vm.swappiness", "vm.dirty_expire_centisecs", "vm.overcommit_memory",
              "vm.dirty_writeback_centisecs", "vm.watermark_scale_factor"]  # fmt: skip


def live_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root: real-kernel tuning tests need root"
    if HostFS("/").mount_read_only("proc/sys") or not os.access("/proc/sys/vm/swappiness", os.W_OK):
        return "/proc/sys is read-only here (a container?)"
    return None


@pytest.fixture
def live(tmp_path):
    """Save every knob and file the profiles can touch; put them back afterwards."""
    reason = live_skip_reason()
    if reason:
        pytest.skip(reason)
    host = HostFS("/")
    keys = set(EXTRA_KEYS)
    for name in ("broker", "latency", "throughput"):
        keys |= set(load_profile(name).sections.get("sysctl", {}))
    knobs = [sysctl_path(k) for k in sorted(keys)] + THP
    saved = {p: host.read(p) for p in knobs if host.exists(p)}
    files = {p: host.read(p) for p in (DROPIN, LIMITS_FILE, sysctl_conf_path("broker"))}
    try:
        yield tmp_path / "state"
    finally:
        for path, raw in saved.items():
            value = parse_choice(raw)[0] if "[" in raw else raw
            if host.read(path) != raw:
                host.write_knob(path, value)
        for path, raw in files.items():
            if raw is None:
                host.remove(path)
            elif host.read(path) != raw:
                host.write_file(path, raw)
        for d in ("etc/systemd/system/floodgate-broker.service.d",):
            p = host.path(d)
            if p.is_dir() and not any(p.iterdir()):
                p.rmdir()


def read_all(paths) -> dict[str, str | None]:
    host = HostFS("/")
    return {p: host.read(p) for p in paths}


def write_profile(d: Path, name: str, body: str) -> Path:
    d.mkdir(exist_ok=True)
    (d / f"{name}.toml").write_text(body)
    return d


def test_real_sysctls_apply_verify_rollback(live, tmp_path):
    profiles = write_profile(tmp_path / "p", "live", """
[sysctl]
"vm.swappiness" = { value = 7, reason = "test" }
"vm.dirty_writeback_centisecs" = { value = 1234, reason = "test" }
"vm.extra_free_kbytes" = { ram_percent = 1.0, reason = "test: watermark_scale_factor here" }
"vm.no_such_key_here" = { value = 1, reason = "reported unsupported, not an error" }
""")  # fmt: skip
    paths = [sysctl_path(k) for k in ("vm.swappiness", "vm.dirty_writeback_centisecs",
                                      "vm.watermark_scale_factor")]  # fmt: skip
    before = read_all(paths)
    plan = build_plan("live", "/", [profiles])
    statuses = {c.setting.name: c.status for c in plan.checks}
    assert statuses["vm.no_such_key_here"] == "unsupported"
    result = apply_plan(plan, state_dir=live)
    assert result.still_drifting == []
    assert HostFS("/").read("proc/sys/vm/swappiness") == "7\n"
    assert build_plan("live", "/", [profiles]).compliant
    rb = rollback("/", state_dir=live)
    assert rb.mismatches == []
    assert read_all(paths) == before  # byte for byte


def test_real_failure_half_way_restores_what_was_applied(live, tmp_path):
    profiles = write_profile(tmp_path / "p", "bad", """
[sysctl]
"vm.swappiness" = { value = 33, reason = "applied first" }
"vm.dirty_expire_centisecs" = { value = 2999, reason = "applied second" }
"vm.overcommit_memory" = { value = 7, reason = "the kernel refuses this (0..2)" }
""")  # fmt: skip
    paths = [sysctl_path(k) for k in ("vm.swappiness", "vm.dirty_expire_centisecs",
                                      "vm.overcommit_memory")]  # fmt: skip
    before = read_all(paths)
    with pytest.raises(ApplyError, match=r"apply failed at vm.overcommit_memory.*restored 2"):
        apply_plan(build_plan("bad", "/", [profiles]), state_dir=live)
    assert read_all(paths) == before


@pytest.fixture
def loop_device(tmp_path):
    if live_skip_reason() or not shutil.which("losetup"):
        pytest.skip(live_skip_reason() or "no losetup")
    backing = tmp_path / "disk.img"
    with open(backing, "wb") as f:
        f.truncate(32 * 1024 * 1024)
    out = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"losetup failed: {out.stderr.strip()}")
    dev = out.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


def test_real_loop_device_scheduler(live, loop_device, tmp_path):
    name = os.path.basename(loop_device)
    knob = f"sys/block/{name}/queue/scheduler"
    host = HostFS("/")
    original = host.read(knob)
    if "deadline" not in original:
        pytest.skip(f"kernel offers no deadline scheduler for {name}: {original.strip()}")
    profiles = write_profile(tmp_path / "p", "disk", """
[scheduler]
"data_disk" = { value = "deadline", reason = "test" }
""")  # fmt: skip
    try:
        if parse_choice(original)[0] == "mq-deadline":
            host.write_knob(knob, "none")  # start from something else
            original = host.read(knob)
        plan = build_plan("disk", "/", [profiles], device=loop_device)
        assert [c.setting.name for c in plan.changes] == [f"scheduler.{name}"]
        apply_plan(plan, state_dir=live)
        assert parse_choice(host.read(knob))[0] in ("mq-deadline", "deadline")
        assert build_plan("disk", "/", [profiles], device=name).compliant
        assert rollback("/", state_dir=live).mismatches == []
        assert host.read(knob) == original
    finally:
        host.write_knob(knob, parse_choice(original)[0])


def test_real_data_dir_resolves_to_the_loop_device(loop_device, tmp_path):
    if not shutil.which("mkfs.ext4"):
        pytest.skip("no mkfs.ext4")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mkfs.ext4", "-q", "-F", loop_device], check=True, capture_output=True)
    subprocess.run(["mount", loop_device, str(mnt)], check=True)
    try:
        (mnt / "store").mkdir()
        plan = build_plan("broker", "/", data_dir=str(mnt / "store"))
        assert plan.devices == [os.path.basename(loop_device)]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_real_broker_profile_round_trip(live, loop_device):
    host = HostFS("/")
    name = os.path.basename(loop_device)
    plan = build_plan("broker", "/", device=name)
    touched = sorted({w.path for c in plan.changes for w in c.writes})
    before = read_all(touched)
    result = apply_plan(plan, state_dir=live)
    assert result.still_drifting == []
    assert build_plan("broker", "/", device=name).compliant
    assert host.read(DROPIN) is not None
    rb = rollback("/", state_dir=live)
    assert rb.mismatches == []
    after = read_all(touched)
    for path in touched:
        if before[path] and "[" in before[path]:
            assert parse_choice(after[path])[0] == parse_choice(before[path])[0], path
        else:
            assert after[path] == before[path], path


def test_persisted_sysctl_file_is_accepted_by_sysctl(live, tmp_path):
    if not shutil.which("sysctl"):
        pytest.skip("no sysctl(8)")
    result = persist_plan(build_plan("broker", "/"), dry_run=True)
    conf = tmp_path / "60-floodgate-broker.conf"
    conf.write_text(result.files[sysctl_conf_path("broker")])
    out = subprocess.run(["sysctl", "--dry-run", "-p", str(conf)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "vm.swappiness = 1" in out.stdout


def test_read_only_proc_sys_says_so_and_accepts_what_is_right(tmp_path):
    """A container-style read-only /proc/sys: a fake tree's proc/sys bind-mounted read-only."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to bind-mount a read-only proc/sys")
    root = tmp_path / "root"
    proc_sys = root / "proc/sys"
    (proc_sys / "vm").mkdir(parents=True)
    (root / "proc/meminfo").write_text("MemTotal: 8388608 kB\n")
    (proc_sys / "vm/swappiness").write_text("60\n")
    (proc_sys / "vm/dirty_ratio").write_text("20\n")
    mounted = subprocess.run(["mount", "--bind", str(proc_sys), str(proc_sys)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"bind mount failed: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(proc_sys)], check=True)
        profiles = write_profile(tmp_path / "p", "ro", """
[sysctl]
"vm.swappiness" = { value = 1, reason = "needs a write" }
"vm.dirty_ratio" = { value = 20, reason = "already right" }
""")  # fmt: skip
        with pytest.raises(HostError, match=r"read-only \(a container\?\): cannot change vm.swappiness; 1 "):
            apply_plan(build_plan("ro", root, [profiles]), state_dir=tmp_path / "s")
        (tmp_path / "p" / "ro.toml").write_text(
            '[sysctl]\n"vm.dirty_ratio" = { value = 20, reason = "already right" }\n'
        )
        result = apply_plan(build_plan("ro", root, [profiles]), state_dir=tmp_path / "s")
        assert result.journal is None  # nothing to change, nothing written: success
    finally:
        subprocess.run(["umount", str(proc_sys)], check=False)
