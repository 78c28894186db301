"""Message trace (消息轨迹): trace records kept as messages in a system topic on the
brokers themselves (the Mogujie talk: "everything is a message", no third-party store).

`records` defines the records and how a batch of them travels as one message;
`dispatcher` is the client side that batches and sends them off the hot path.
"""

from broker_core.trace.records import PROP_TRACE, TRACE_TOPIC, Sampler

__all__ = ["PROP_TRACE", "TRACE_TOPIC", "Sampler"]
