"""A replicated group's brokers answer with copies: its slaves hold their master's messages,
offsets and so consumer lag. What is summed or shown per group counts each copy once."""

from __future__ import annotations

from collections.abc import Iterable


def slave_copies(answered: Iterable[tuple[str, str, bool]]) -> set[str]:
    """Of the brokers that answered, as (name, group, is a slave): the slaves whose figures
    are a copy of another answering broker's of their group. A slave whose group has no
    other answer is the one to read (consumers read and commit there meanwhile)."""
    members = list(answered)
    led = {group for _name, group, slave in members if not slave}
    return {name for name, group, slave in members if slave and group in led}
