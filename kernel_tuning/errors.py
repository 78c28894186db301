"""The kernel_tuning error family: the CLI prints one line and exits 1."""

from __future__ import annotations


class TuningError(Exception):
    """Base of every failure this package reports."""


class ProfileError(TuningError):
    """A profile is unknown, malformed, or names a key no plugin knows."""


class SafetyError(TuningError):
    """A target is outside the hard safety bounds (override with force)."""


class HostError(TuningError):
    """The host could not be read or written (missing file, read-only, not root)."""


class ApplyError(TuningError):
    """An apply failed part-way; the settings already written were restored."""


class JournalError(TuningError):
    """No such journal, or it cannot be rolled back."""
