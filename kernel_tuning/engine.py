"""Apply, verify and roll back a plan.

apply: check writability first (not root / read-only /proc/sys are one
clear error before anything is written), save and fsync the journal of
originals, then apply setting by setting with the plugins' setters. On any
failure the settings already written are restored in reverse order and the
apply fails. rollback: restore a journal's entries in reverse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime

from kernel_tuning import journal as jn
from kernel_tuning.errors import ApplyError, HostError, JournalError, TuningError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plan import Plan, check_settings
from kernel_tuning.plugins import PLUGINS
from kernel_tuning.plugins.base import DRIFT, parse_choice


@dataclass
class ApplyResult:
    plan: Plan
    journal: jn.Journal | None
    applied: list[str] = field(default_factory=list)
    still_drifting: list[dict] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict:
        return {
            "profile": self.plan.profile.name,
            "dry_run": self.dry_run,
            "journal": self.journal.id if self.journal else None,
            "applied": self.applied,
            "still_drifting": self.still_drifting,
            "settings": [c.to_dict() for c in self.plan.checks],
            "notes": self.plan.notes,
        }


@dataclass
class RollbackResult:
    journal: jn.Journal
    restored: list[str]
    mismatches: list[str]
    changed_since_apply: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "journal": self.journal.id,
            "profile": self.journal.profile,
            "restored": self.restored,
            "mismatches": self.mismatches,
            "changed_since_apply": self.changed_since_apply,
        }


def preflight(host: HostFS, plan: Plan) -> None:
    """Refuse before writing anything when some change cannot be written."""
    blocked = [
        c.setting.name for c in plan.changes if not all(host.writable(w.path) for w in c.writes)
    ]
    if not blocked:
        return
    if os.geteuid() != 0:
        raise HostError(f"need root to change: {', '.join(blocked)} (run as root)")
    if host.mount_read_only("proc/sys"):
        ok = len(plan.checks) - len(plan.changes)
        raise HostError(
            f"{host.shown('proc/sys')} is read-only (a container?): cannot change "
            f"{', '.join(blocked)}; {ok} setting(s) already right"
        )
    raise HostError(f"read-only on this host: {', '.join(blocked)}")


def record_originals(host: HostFS, plan: Plan, journal: jn.Journal) -> None:
    seen: set[str] = set()
    for check in plan.changes:
        plugin = PLUGINS[check.setting.plugin]
        for w in check.writes:
            if w.path in seen:
                continue
            seen.add(w.path)
            raw = host.read(w.path)
            journal.entries.append(
                jn.Entry(
                    path=w.path,
                    kind=w.kind,
                    setting=check.setting.name,
                    original=raw,
                    restore=plugin.restore_value(raw) if w.kind == "knob" and raw is not None else None,
                    created_dir=host.missing_ancestor(w.path) if raw is None else None,
                )
            )


def apply_plan(
    plan: Plan, state_dir=None, dry_run: bool = False, now: datetime | None = None
) -> ApplyResult:
    host = HostFS(plan.root)
    if dry_run or not plan.changes:
        return ApplyResult(plan, None, dry_run=dry_run)
    preflight(host, plan)
    directory = jn.journal_dir(plan.root, state_dir)
    with jn.locked(directory):
        return _apply_locked(host, plan, directory, now)


def _apply_locked(host: HostFS, plan: Plan, directory, now: datetime | None) -> ApplyResult:
    journal = jn.Journal(
        id=jn.new_id(plan.profile.name, directory, now),
        profile=plan.profile.name,
        root=plan.root,
        created=(now or datetime.now().astimezone()).isoformat(),
    )
    record_originals(host, plan, journal)
    jn.save(journal, directory)  # durable before the first write
    touched: list[str] = []
    applied: list[str] = []
    for check in plan.changes:
        setting = check.setting
        try:
            PLUGINS[setting.plugin].set(host, setting, write=True)
        except (TuningError, OSError) as exc:
            touched += [w.path for w in check.writes]  # a partial write is restored too
            errors = restore_entries(host, [e for e in journal.entries if e.path in touched])
            journal.status, journal.error = jn.RESTORED, f"{setting.name}: {exc}"
            jn.save(journal, directory)
            tail = f"; restore problems: {'; '.join(errors)}" if errors else ""
            raise ApplyError(
                f"apply failed at {setting.name}: {exc}; restored {len(applied)} setting(s) "
                f"already applied (journal {journal.id}){tail}"
            ) from None
        touched += [w.path for w in check.writes]
        applied.append(setting.name)
    for entry in journal.entries:
        entry.applied = host.read(entry.path)
    journal.status = jn.APPLIED
    jn.save(journal, directory)
    after = check_settings(host, [c.setting for c in plan.changes])
    drifting = [c.to_dict() for c in after if c.status == DRIFT]
    return ApplyResult(plan, journal, applied, drifting)


def restore_entries(host: HostFS, entries: list[jn.Entry]) -> list[str]:
    """Put entries back in reverse order; keep going past errors, return them."""
    errors = []
    for entry in reversed(entries):
        try:
            restore_entry(host, entry)
        except (TuningError, OSError) as exc:
            errors.append(f"{entry.path}: {exc}")
    return errors


def restore_entry(host: HostFS, entry: jn.Entry) -> None:
    if entry.kind == "knob":
        if entry.restore is not None:
            host.write_knob(entry.path, entry.restore)
    elif entry.original is None:
        host.remove(entry.path)
        if entry.created_dir:
            host.remove_empty_dirs(entry.path, entry.created_dir)
    else:
        host.write_file(entry.path, entry.original)


def mismatch(host: HostFS, entry: jn.Entry) -> str | None:
    """Whether an entry now reads as it did before the apply (None: it does)."""
    now = host.read(entry.path)
    if entry.kind == "knob":
        if entry.original is None or now is None:
            return None
        same = (
            parse_choice(now)[0] == parse_choice(entry.original)[0]
            if "[" in entry.original
            else now == entry.original
        )
    else:
        same = now == entry.original
    return None if same else f"{entry.path}: was {entry.original!r}, now {now!r}"


def rollback(root="/", journal_id: str | None = None, state_dir=None) -> RollbackResult:
    host = HostFS(root)
    directory = jn.journal_dir(root, state_dir)
    if not directory.is_dir():
        raise JournalError(f"nothing to roll back: no journal dir {directory}")
    with jn.locked(directory):
        return _rollback_locked(host, directory, journal_id)


def _rollback_locked(host: HostFS, directory, journal_id: str | None) -> RollbackResult:
    journal = jn.load(directory, journal_id) if journal_id else jn.latest_restorable(directory)
    if journal.status in (jn.ROLLED_BACK, jn.RESTORED):
        raise JournalError(f"journal {journal.id} is already restored ({journal.status})")
    changed = [
        f"{e.path}: applied {e.applied!r}, found {now!r}"
        for e in journal.entries
        if journal.status == jn.APPLIED and (now := host.read(e.path)) != e.applied
    ]
    errors = restore_entries(host, journal.entries)
    if errors:
        journal.error = "; ".join(errors)
        jn.save(journal, directory)
        raise JournalError(f"rollback of {journal.id} incomplete: {journal.error}")
    journal.status = jn.ROLLED_BACK
    jn.save(journal, directory)
    mismatches = [m for m in (mismatch(host, e) for e in journal.entries) if m]
    return RollbackResult(journal, [e.path for e in journal.entries], mismatches, changed)
