"""The broker's storage: CommitLog and ConsumeQueues on mmap'd segments (RocketMQ's model).

from broker_core.store import MessageStore, StoreConfig
with MessageStore("/data/broker-a", StoreConfig(flush="sync")) as store:
    r = store.put("orders", 0, b"...", tags="paid")
    got = store.get("orders", 0, r.queue_offset)
"""

from broker_core.protocol.record import Message
from broker_core.store.config import StoreConfig
from broker_core.store.recovery import RecoveryReport
from broker_core.store.results import GetResult, GetStatus, PutResult, PutStatus
from broker_core.store.retention import RetentionReport
from broker_core.store.store import MessageStore

__all__ = [
    "GetResult",
    "GetStatus",
    "Message",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "RetentionReport",
    "StoreConfig",
]
