"""The fuse's one error family; the CLI turns it into one line and exit 1."""

from __future__ import annotations


class FuseError(Exception):
    """Bad fuse settings, bad input to a fuse method, or a simulation that cannot run."""
