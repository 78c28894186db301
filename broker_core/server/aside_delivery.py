"""Messages kept aside coming back: a delayed message that fell due (server.delay_service)
and a transaction's committed half (server.transactions), each stored in its real queue
and announced to the pulls held on it, as a send would be.
"""

from __future__ import annotations

from broker_core.server.delay_service import store_due
from broker_core.server.tx_table import committed_copy_props
from broker_core.store import PutStatus


def _queue(broker, topic: str, qid: int) -> int | None:
    """The queue a message kept aside goes back to (its topic may have shrunk since)."""
    queues = broker.topics.get(topic, create=True)
    if queues is None:
        return None
    return qid if qid < queues else qid % queues


def _arrived(broker, topic: str, qid: int) -> None:
    broker.pulls.arrived(topic, qid)
    broker.heat.hit(topic, qid)


def deliver_due(broker, topic: str, qid: int, message) -> bool:
    """A delayed message due now, into its real queue; False if it could not be (the
    delay service tries again)."""
    qid = _queue(broker, topic, qid)
    if qid is None:
        return False
    result = store_due(broker.store, topic, qid, message)
    if result.status is not PutStatus.PUT_OK:
        return False
    if broker.ha is not None:
        broker.ha.appended(result.end_offset)
    _arrived(broker, topic, qid)
    return True


def commit_half(broker, topic: str, qid: int, m):
    """A committed half in its real queue as it was sent (born time included); None
    when the topic takes no messages."""
    qid = _queue(broker, topic, qid)
    if qid is None:
        return None
    result = broker.store.put(topic, qid, m.body, m.tags, m.keys, committed_copy_props(m),
                              wait=False, born_timestamp=m.born_timestamp)
    if result.status is PutStatus.PUT_OK:
        _arrived(broker, topic, qid)
    return result
