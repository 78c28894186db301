"""The broker's error family: everything broker_core raises on purpose is a BrokerError.

The console turns a BrokerError into one line on stderr and exit code 1
(console/errors.py lists "broker_core.errors:BrokerError").
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every error broker_core raises deliberately."""


class StoreConfigError(BrokerError):
    """A StoreConfig value is out of range or inconsistent."""


class StoreLockedError(BrokerError):
    """Another MessageStore (this or another process) holds the data dir's lock."""


class StoreClosedError(BrokerError):
    """The store was used after close()."""


class StoreCorruptError(BrokerError):
    """On-disk state that recovery cannot repair (e.g. a gap between segments)."""


class MessageIllegalError(BrokerError):
    """A message that must not be stored: bad topic, queue id, properties..."""


class MessageTooLargeError(MessageIllegalError):
    """A message body (or batch) above StoreConfig.max_message_bytes."""


class DiskFullError(BrokerError):
    """No room for a new segment or queue file (ENOSPC or over the full ratio)."""


class MessageNotFoundError(BrokerError):
    """No message at a physical offset (expired, not written yet, or not a record's start)."""
