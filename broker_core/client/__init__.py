"""Clients of the broker: producers (threaded and asyncio, over one I/O-free
attempt planner and a `fuse.Fuse`), the consumer, the load generator behind
`floodgate bench produce` and the demo, a producer's own HTTP endpoint, and the
admin calls (topics, drill faults) the console makes.

    from broker_core.client import Producer, AsyncProducer, Consumer
"""

from broker_core.client.aio_producer import AsyncProducer
from broker_core.client.consumer import Consumer
from broker_core.client.producer import Producer, SendFailed, SendResult, normalize_brokers

__all__ = ["AsyncProducer", "Consumer", "Producer", "SendFailed", "SendResult",
           "normalize_brokers"]
