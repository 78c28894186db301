import pytest

from kernel_tuning.persist import THP_TMPFILES, UDEV_RULE, persist_plan, sysctl_conf_path
from kernel_tuning.plan import build_plan
from kernel_tuning.plugins.servicefiles import DROPIN, LIMITS_FILE


def test_persist_writes_the_five_files(tree):
    plan = build_plan("broker", tree.root, device="vda")
    result = persist_plan(plan)
    assert result.written and result.conflicts == []
    conf = tree.read(sysctl_conf_path("broker"))
    assert "vm.swappiness = 1\n" in conf
    assert "vm.watermark_scale_factor = " in conf and "extra_free_kbytes =" not in conf
    # a floor already met is not pinned (file-max here is far above 1048576)
    assert "fs.file-max =" not in conf and "# fs.file-max: already" in conf
    assert "vm.max_map_count = 655360\n" in conf
    rule = tree.read(UDEV_RULE)
    assert 'KERNEL=="vda"' in rule and 'ATTR{queue/scheduler}="mq-deadline"' in rule
    assert "w /sys/kernel/mm/transparent_hugepage/enabled - - - - never\n" in tree.read(THP_TMPFILES)
    dropin = tree.read(DROPIN)
    assert "[Service]\nNUMAPolicy=interleave\nLimitNOFILE=655350\nLimitMEMLOCK=infinity\n" in dropin
    assert "*\thard\tnofile\t655350\n" in tree.read(LIMITS_FILE)
    # what persist wrote, verify counts as applied for the per-process settings
    after = {c.setting.name: c.status for c in build_plan("broker", tree.root).checks}
    assert after["numa.policy"] == after["limits.nofile"] == "ok"


def test_udev_rule_keys_on_the_disk_identity_when_known(tree):
    tree.file("sys/block/vda/wwid", "eui.0025388b71b2c0c4\n")
    result = persist_plan(build_plan("broker", tree.root, device="vda"), dry_run=True)
    assert 'ATTR{wwid}=="eui.0025388b71b2c0c4"' in result.files[UDEV_RULE]
    assert not (tree.root / "etc").exists()  # dry run


def test_conflicts_follow_sysctl_system_order(tree):
    tree.file("etc/sysctl.d/10-early.conf", "vm.swappiness = 30\nvm.dirty_ratio=50\n")
    tree.file("usr/lib/sysctl.d/99-late.conf", "vm/swappiness = 10\n")
    tree.file("etc/sysctl.conf", "# comment\n-vm.overcommit_memory = 2\n")
    result = persist_plan(build_plan("broker", tree.root), dry_run=True)
    found = {(c["key"], c["file"].rsplit("/", 1)[-1], c["wins"]) for c in result.conflicts}
    assert found == {
        ("vm.swappiness", "10-early.conf", "ours"),
        ("vm.swappiness", "99-late.conf", "theirs"),
        ("vm.overcommit_memory", "sysctl.conf", "theirs"),
    }
    assert len(result.overridden) == 2


def test_etc_masks_same_name_in_usr_lib(tree):
    tree.file("usr/lib/sysctl.d/99-late.conf", "vm.swappiness = 10\n")
    tree.file("etc/sysctl.d/99-late.conf", "# masked\n")
    assert persist_plan(build_plan("broker", tree.root), dry_run=True).conflicts == []


def test_systemd_accepts_the_drop_in(tree, tmp_path):
    import os
    import shutil
    import subprocess

    if not shutil.which("systemd-analyze"):
        pytest.skip("no systemd-analyze")
    files = persist_plan(build_plan("broker", tree.root), dry_run=True).files
    units = tmp_path / "units"
    (units / "floodgate-broker.service.d").mkdir(parents=True)
    (units / "floodgate-broker.service").write_text(
        "[Unit]\nDescription=floodgate broker\n[Service]\nExecStart=/bin/true\n"
    )
    (units / "floodgate-broker.service.d/60-floodgate.conf").write_text(files[DROPIN])
    out = subprocess.run(
        ["systemd-analyze", "verify", str(units / "floodgate-broker.service")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Unknown key" not in out.stderr and "Failed to parse" not in out.stderr, out.stderr
