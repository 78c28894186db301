"""Clients of the broker: producers (threaded and asyncio, over one I/O-free
attempt planner and a `fuse.Fuse`), the consumer, the load generator behind
`floodgate bench produce` and the demo, a producer's own HTTP endpoint, and the
admin calls (topics, drill faults) the console makes.

    from broker_core.client import Producer, AsyncProducer, Consumer
"""

import importlib

# Resolved on first use (PEP 562): a command that needs only `admin` (topics, offsets,
# quotas) does not pay for the producers' and the consumer's imports (numpy, the store).
_WHERE = {
    "AsyncProducer": "broker_core.client.aio_producer",
    "Consumer": "broker_core.client.consumer",
    "Producer": "broker_core.client.producer",
    "SendFailed": "broker_core.client.producer",
    "SendResult": "broker_core.client.producer",
    "normalize_brokers": "broker_core.client.producer",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
