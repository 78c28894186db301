import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel_tuning import journal as jn
from kernel_tuning.engine import apply_plan, rollback
from kernel_tuning.errors import ApplyError, HostError, JournalError
from kernel_tuning.plan import build_plan
from kernel_tuning.plugins.base import parse_choice
from kernel_tuning.plugins.servicefiles import DROPIN, LIMITS_FILE

NOW = datetime(2026, 11, 11, 0, 0, tzinfo=UTC)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under root with its bytes (what a rollback must bring back).

    A choice file ("always [madvise] never") is compared by its selection: the
    kernel takes back only the name, and a fake tree holds what was written.
    """
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                if b"[" in data:
                    data = parse_choice(data.decode())[0].encode() + b"\n"
                out[str(p.relative_to(root))] = data
    return out


def test_apply_verify_rollback_round_trips_byte_for_byte(tree, tmp_path):
    state = tmp_path / "state"
    before = snapshot(tree.root)
    plan = build_plan("broker", tree.root, device="vda")
    assert not plan.compliant
    result = apply_plan(plan, state_dir=state, now=NOW)
    assert result.journal.id == "20261111T000000Z-broker"
    assert result.still_drifting == []
    assert "vm.swappiness" in result.applied and "thp.enabled" in result.applied
    assert tree.sysctl_value("vm.swappiness") == "1\n"
    assert tree.read("sys/kernel/mm/transparent_hugepage/enabled") == "never\n"
    assert build_plan("broker", tree.root, device="vda").compliant
    saved = json.loads((state / f"{result.journal.id}.json").read_text())
    assert saved["status"] == "applied"
    rb = rollback(tree.root, state_dir=state)
    assert rb.mismatches == []
    assert snapshot(tree.root) == before  # the drop-in and limits files and their dirs are gone too
    assert not (tree.root / "etc").exists()
    with pytest.raises(JournalError, match="nothing to roll back"):
        rollback(tree.root, state_dir=state)


def test_journal_is_saved_before_the_first_write(tree, tmp_path):
    state = tmp_path / "state"
    result = apply_plan(build_plan("base", tree.root), state_dir=state, now=NOW)
    entries = {e.path: e for e in result.journal.entries}
    assert entries["proc/sys/vm/max_map_count"].original == "65530\n"
    assert entries["sys/kernel/mm/transparent_hugepage/enabled"].restore == "madvise"
    assert entries[LIMITS_FILE].original is None and entries[LIMITS_FILE].created_dir == "etc"
    # a second apply in the same second gets its own journal
    tree.sysctl("vm.max_map_count", "1")
    again = apply_plan(build_plan("base", tree.root), state_dir=state, now=NOW)
    assert again.journal.id == "20261111T000000Z-base-2"


def test_failure_half_way_restores_everything_already_applied(tree, tmp_path):
    state = tmp_path / "state"
    before = snapshot(tree.root)
    # dirty_ratio comes after swappiness and the dirty_background_ratio; a knob that
    # refuses every write (ENOSPC) fails the apply there.
    knob = tree.root / "proc/sys/vm/dirty_ratio"
    knob.unlink()
    knob.symlink_to("/dev/full")
    before.pop("proc/sys/vm/dirty_ratio", None)
    plan = build_plan("broker", tree.root, device="vda")
    with pytest.raises(ApplyError, match=r"apply failed at vm.dirty_ratio: .*restored \d+ setting"):
        apply_plan(plan, state_dir=state, now=NOW)
    assert snapshot(tree.root) == before
    saved = jn.load(state, "20261111T000000Z-broker")
    assert saved.status == jn.RESTORED and "vm.dirty_ratio" in saved.error
    with pytest.raises(JournalError, match="already restored"):
        rollback(tree.root, "20261111T000000Z-broker", state_dir=state)


def test_read_only_setting_stops_apply_before_any_write(tree, tmp_path):
    before = snapshot(tree.root)
    (tree.root / "proc/sys/vm/swappiness").chmod(0o444)
    plan = build_plan("broker", tree.root)
    with pytest.raises(HostError, match=r"read-only on this host: vm.swappiness"):
        apply_plan(plan, state_dir=tmp_path / "state")
    assert snapshot(tree.root) == before
    assert not (tmp_path / "state").exists()


def test_read_only_setting_already_right_is_fine(tree, tmp_path):
    tree.sysctl("vm.swappiness", "1")
    (tree.root / "proc/sys/vm/swappiness").chmod(0o444)
    result = apply_plan(build_plan("broker", tree.root), state_dir=tmp_path / "state")
    assert "vm.swappiness" not in result.applied and result.applied


def test_dry_run_and_compliant_hosts_write_nothing(tree, tmp_path):
    before = snapshot(tree.root)
    result = apply_plan(build_plan("broker", tree.root), state_dir=tmp_path / "s", dry_run=True)
    assert result.journal is None and result.dry_run
    assert snapshot(tree.root) == before and not (tmp_path / "s").exists()


def test_crashed_apply_is_recovered_from_its_journal(tree, tmp_path):
    state = tmp_path / "state"
    before = snapshot(tree.root)
    result = apply_plan(build_plan("broker", tree.root, device="vda"), state_dir=state, now=NOW)
    # What a crash part-way leaves: the journal still says "applying", and the
    # later settings were never written.
    path = state / f"{result.journal.id}.json"
    saved = json.loads(path.read_text())
    saved["status"] = jn.APPLYING
    path.write_text(json.dumps(saved))
    tree.sysctl("vm.dirty_writeback_centisecs", "500")
    rb = rollback(tree.root, state_dir=state)
    assert rb.journal.id == result.journal.id and rb.mismatches == []
    assert rb.changed_since_apply == []  # a crashed apply has no after-state to compare
    assert snapshot(tree.root) == before


def test_rollback_of_unknown_journal_lists_known_ones(tree, tmp_path):
    state = tmp_path / "state"
    apply_plan(build_plan("base", tree.root), state_dir=state, now=NOW)
    with pytest.raises(JournalError, match=r"no journal 'x'.*20261111T000000Z-base"):
        rollback(tree.root, "x", state_dir=state)
    with pytest.raises(JournalError, match="bad journal id"):
        rollback(tree.root, "../etc/passwd", state_dir=state)


def test_default_journal_dir_is_under_the_root(tree):
    result = apply_plan(build_plan("base", tree.root), now=NOW)
    assert (tree.root / jn.JOURNAL_DIR / f"{result.journal.id}.json").is_file()
    rollback(tree.root)
    assert not (tree.root / DROPIN).exists()


def test_one_apply_or_rollback_at_a_time(tree, tmp_path):
    import fcntl

    state = tmp_path / "state"
    state.mkdir()
    with open(state / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(JournalError, match="another floodgate tune apply or rollback"):
            apply_plan(build_plan("base", tree.root), state_dir=state)
    assert apply_plan(build_plan("base", tree.root), state_dir=state).journal is not None


def test_a_sysctl_typo_is_unsupported_with_a_hint(tree, profile_dir):
    (profile_dir / "typo.toml").write_text('[sysctl]\n"vm.swapiness" = { value = 1, reason = "r" }\n')
    check = build_plan("typo", tree.root, [profile_dir]).checks[0]
    assert check.status == "unsupported"
    assert "did you mean vm.swappiness?" in check.detail


def test_rollback_notes_values_changed_after_the_apply(tree, tmp_path):
    state = tmp_path / "state"
    apply_plan(build_plan("base", tree.root), state_dir=state, now=NOW)
    tree.sysctl("vm.max_map_count", "999999")  # someone tuned by hand since
    rb = rollback(tree.root, state_dir=state)
    assert rb.changed_since_apply == [
        "proc/sys/vm/max_map_count: applied '655360\\n', found '999999\\n'"
    ]
    assert tree.sysctl_value("vm.max_map_count") == "65530\n"
