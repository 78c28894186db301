"""The loops of `Consumer.consume`: a message handed to the handler, a failure sent back
to the group's retry topic (concurrently) or retried in place (orderly), offsets
committed after each batch.
"""

from __future__ import annotations

import logging

from broker_core.client.retry import send_back
from broker_core.errors import BrokerError

log = logging.getLogger("floodgate.consumer")


def consume_concurrently(consumer, handler, max_msgs: int, timeout: float, stop) -> None:
    """Until `stop` is set: a failed message is sent back (a broadcast consumer's is
    counted and logged, not retried); offsets ride the next pulls after each batch."""
    while stop is None or not stop.is_set():
        # send-backs go out without holding up the batch; all are acknowledged (or the
        # message's queue rewound) before the commit that covers them
        backs = []
        for m in consumer.poll(max_msgs, timeout):
            try:
                handler(m)
            except Exception:  # noqa: BLE001 - the handler's failure: retried later
                if consumer.broadcast:  # not retried (RocketMQ's rule): said and counted
                    consumer.failed += 1
                    log.warning("%s: handler failed on %s (broadcast: not retried)",
                                consumer.group, m.msg_id, exc_info=True)
                    continue
                _kind, fut = send_back(
                    consumer._sender_for_nacks(), consumer.group, m, consumer.retry_delay,
                    consumer.max_reconsume, wait=False)
                backs.append((m, fut))
        for m, fut in backs:
            try:
                fut.result()
            except BrokerError as exc:  # not sent back: it comes again (rewound)
                log.warning("%s: could not send %s back: %s", consumer.group, m.msg_id, exc)
                consumer._rewind(m)
        consumer.commit(wait=False)  # riding the next pulls: no round trip a batch
    consumer.commit()


def consume_orderly(consumer, handler, max_msgs: int, timeout: float, stop) -> None:
    """Until `stop` is set: one queue's messages in order while its lock holds; a
    failure holds its queue back for the rest of the batch, to be retried in place."""
    while stop is None or not stop.is_set():
        held_back: set[tuple[str, int]] = set()  # queues whose turn in this batch is over
        for m in consumer.poll(max_msgs, timeout):
            queue = consumer._pulls.queue_of(m)
            if queue is None or queue in held_back:
                continue
            if not consumer._leases.valid(queue):  # lapsed meanwhile: another may hold it
                consumer._pulls.drop(queue)
                held_back.add(queue)
                continue
            try:
                handler(m)
            except Exception:  # noqa: BLE001 - the handler's failure: retried in place
                log.warning("%s: handler failed on %s (orderly: retried in place)",
                            consumer.group, m.msg_id, exc_info=True)
                if consumer._in_place.failed(queue, m) == "retry":
                    held_back.add(queue)
                continue
            consumer._in_place.done(queue, m)
        consumer.commit()
