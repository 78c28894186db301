"""Host tuning for floodgate brokers: profiles planned, applied, verified,
rolled back and persisted (sysctl, block scheduler, THP, NUMA, limits).

The functions here are the package's public face, for the CLI and the
console's Host screen; they return data and raise `TuningError`s.
"""

from __future__ import annotations

from kernel_tuning.engine import ApplyResult, RollbackResult, apply_plan, rollback
from kernel_tuning.errors import TuningError
from kernel_tuning.numa import exec_interleaved, interleave_command
from kernel_tuning.persist import PersistResult, persist_plan
from kernel_tuning.plan import Plan, build_plan
from kernel_tuning.profile import available_profiles, load_profile


def verify_profile(
    name: str,
    root="/",
    profile_dirs=(),
    device: str | None = None,
    data_dir: str | None = None,
    force: bool = False,
) -> dict:
    """Where the host stands against a profile, nothing written.

    {"profile", "compliant", "settings": [{"name", "current", "target",
    "status" (ok/drift/unsupported), "reason", ...}], "notes"}
    """
    plan = build_plan(name, root, profile_dirs, device=device, data_dir=data_dir, force=force)
    return plan.to_dict()


__all__ = [
    "ApplyResult",
    "PersistResult",
    "Plan",
    "RollbackResult",
    "TuningError",
    "apply_plan",
    "available_profiles",
    "build_plan",
    "exec_interleaved",
    "interleave_command",
    "load_profile",
    "persist_plan",
    "rollback",
    "verify_profile",
]
