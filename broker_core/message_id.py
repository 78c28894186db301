"""Message ids (RocketMQ's offset message id): the storing broker and the physical offset.

    32 hex digits = broker IPv4 (8) | broker port (8) | CommitLog offset (16)

The broker is the one whose address the record's store-host field holds: the
master that stored it, kept byte for byte by its slaves, so the same id finds
the message on any member of its group. No lookup table is needed: the id is
where the message is.
"""

from __future__ import annotations

import re
import socket
import struct
from functools import lru_cache

from broker_core.errors import BrokerError

_ID = struct.Struct(">4sIq")
ID_CHARS = 2 * _ID.size  # 32


class MessageIdError(BrokerError):
    """A string that is not a message id."""


@lru_cache(maxsize=256)
def _ipv4(host: str) -> bytes:
    try:
        return socket.inet_aton(host)
    except OSError:
        try:
            return socket.inet_aton(socket.gethostbyname(host))
        except OSError as exc:
            raise MessageIdError(f"broker host {host!r} has no IPv4 address") from None \
                if exc else None


def encode_id(addr: str, phys: int) -> str:
    """'ip:port' (or host:port) and a physical offset -> the message id."""
    host, _, port = addr.rpartition(":")
    if not port.isdigit():
        raise MessageIdError(f"broker address {addr!r} is not HOST:PORT")
    return _ID.pack(_ipv4(host or "127.0.0.1"), int(port), phys).hex().upper()


def decode_id(text: str) -> tuple[str, int]:
    """The id -> ('ip:port', physical offset); MessageIdError naming what is wrong."""
    s = text.strip() if isinstance(text, str) else ""
    if len(s) != ID_CHARS:
        raise MessageIdError(f"bad message id {text!r}: expected {ID_CHARS} hex digits "
                             f"(broker IPv4, port, commitlog offset), got {len(s)} characters")
    try:
        ip, port, phys = _ID.unpack(bytes.fromhex(s))
    except ValueError:
        raise MessageIdError(f"bad message id {text!r}: not hexadecimal") from None
    if phys < 0 or not 0 < port < 65536:
        raise MessageIdError(f"bad message id {text!r}: port {port} or offset {phys} "
                             "out of range")
    return f"{socket.inet_ntoa(ip)}:{port}", phys


ROCKETMQ_ID = re.compile(r"^01[0-9A-Fa-f]{32}$")  # RocketMQ 5's client-made id (v1, 34 digits)
NOT_OURS = ("a RocketMQ client's message id, which names no broker: find the message by "
            "its keys")


def rocketmq_id(text: str) -> bool:
    """Whether `text` is a message id a RocketMQ client made (its UNIQ_KEY), not ours."""
    return bool(ROCKETMQ_ID.match(text.strip()))
