"""The error family of spark_reports: one line on stderr, exit 1 in the CLI."""

from __future__ import annotations


class ReportError(Exception):
    """A report or generator job could not do what was asked."""


class SchemaMismatch(ReportError):
    """The input's schema is not the metrics-log schema (names the column)."""


class EmptyInput(ReportError):
    """No rows to report on (missing path, or nothing left after the filters)."""
