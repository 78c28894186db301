"""Transactional messages (RocketMQ's half messages): the property that makes a send a
half, the system topics the broker keeps them and their outcomes in, the states a
producer's local transaction and its check-back answer with, and the check-back
schedule.

A half is stored in HALF_TOPIC queue 0 with its real topic and queue in properties
(as a delayed message is: protocol.delay); END_TRANSACTION commits it (the broker
stores it in its real queue) or rolls it back, and either way appends an op record
to OP_TOPIC queue 0 naming the half's offset: the ops are the truth a restart, a
SIGKILL or a promoted slave rebuilds the pending set from.
"""

from __future__ import annotations

from enum import StrEnum

PROP_TX_HALF = "TRAN_MSG"  # "true" on a half message (RocketMQ's property)
HALF_TOPIC = "%TX_HALF%"
OP_TOPIC = "%TX_OP%"

CHECK_AFTER_S = 6.0  # a half unresolved this long is checked back (RocketMQ: 6 s)
CHECK_INTERVAL_S = 6.0  # ... and again this often
MAX_CHECKS = 15  # ... at most this many times, then rolled back (RocketMQ: 15)


class TxState(StrEnum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


# who resolved a half: its producer right after the local transaction, its producer
# group answering a check-back, an operator (`floodgate tx resolve`), or the broker
# when the checks ran out
RESOLVERS = ("producer", "check", "operator", "checks-exhausted")


def op_body(decision: TxState, half_offset: int, by: str) -> bytes:
    return f"{decision.value} {half_offset} {by}".encode()


def parse_op(body: bytes) -> tuple[TxState, int, str] | None:
    """An op record's (decision, half offset, resolver); None when it is not one."""
    try:
        decision, offset, by = body.decode().split(" ", 2)
        return TxState(decision), int(offset), by
    except ValueError:
        return None


def tx_id(broker: str, half_offset: int) -> str:
    """How an operator names a half: the broker (or group) holding it and its offset."""
    return f"{broker}:{half_offset}"


def parse_tx_id(text: str) -> tuple[str, int]:
    broker, sep, offset = text.rpartition(":")
    if not sep or not broker or not offset.isdigit():
        raise ValueError(f"a transaction id is BROKER:OFFSET as `floodgate tx list` shows it, "
                         f"not {text!r}")
    return broker, int(offset)
