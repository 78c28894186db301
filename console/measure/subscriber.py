"""A subscriber of a measured cell: reads everything of the topic as one consumer group
until SIGTERM (the subscribe TPS is counted by the broker: messages out).

    python -m console.measure.subscriber ADDR TOPIC
"""

from __future__ import annotations

import signal
import sys
import threading

from broker_core.client.consumer import Consumer

GROUP = "capacity-measure"


def main(addr: str, topic: str) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Consumer(GROUP, topic, {"measured": addr}, client_id="capacity-measure") as c:
        while not stop.is_set():
            if c.poll(max_msgs=1024, timeout=0.5):
                c.commit(wait=False)  # riding the next pull
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
