"""A subscriber of a measured cell: reads everything of the topic as one consumer group
until SIGTERM (the subscribe TPS is counted by the broker: messages out).

    python -m console.measure.subscriber ADDR TOPIC[,TOPIC...] [GROUP [START_AT]]
"""

from __future__ import annotations

import signal
import sys
import threading
import time

from broker_core.client.consumer import Consumer

GROUP = "capacity-measure"


def main(addr: str, topics: str, group: str = GROUP, start_at: str = "0") -> int:
    """`topics`: one, or several comma-separated (a consumer each, in threads); nothing is
    read before `start_at` (a Unix time: started early, the imports are done by then)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if stop.wait(max(0.0, float(start_at) - time.time())):
        return 0

    def read(topic: str) -> None:
        with Consumer(group, topic, {"measured": addr}) as c:
            while not stop.is_set():
                if c.poll(max_msgs=1024, timeout=0.5):
                    c.commit(wait=False)  # riding the next pull

    threads = [threading.Thread(target=read, args=(t,), daemon=True) for t in topics.split(",")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
