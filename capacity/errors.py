"""The one error family of `capacity` (named in console/errors.py)."""


class CapacityError(Exception):
    """A capacity model got input it cannot work with; the message says which."""
