"""Child process for crash tests (not a test module): writes to a store until killed.

    python store_writer.py DIR CYCLE THREADS [--exit-after N]

(or ``run(...)`` in a forked child, which skips interpreter start-up.)

Prints ``READY <recovery report JSON>`` once the store is open, then one line
per acknowledged (PUT_OK, flushed) put:
``ACK <topic> <queue_id> <queue_offset> <cycle> <thread> <seq> <size>``.
Bodies are derived from (cycle, thread, seq, size) so the parent can check
them. With --exit-after N it stops after N acks per thread and exits without
closing the store (a crash as far as the store can tell).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import threading


def body_for(cycle: int, thread: int, seq: int, size: int) -> bytes:
    seed = hashlib.sha256(f"{cycle}-{thread}-{seq}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def run(
    path: str, cycle: int, threads: int, exit_after: int | None, out, flush: str | None = None,
    queues: int = 0,
) -> None:
    """Write until killed (or ``exit_after`` acks per thread); never returns. `queues`:
    spread over that many one-queue topics with at most 64 of them mapped (the LRU)."""
    from broker_core.store import MessageStore, StoreConfig

    flush = flush or os.environ.get("FLOODGATE_TEST_FLUSH", "sync")
    store = MessageStore(
        path,
        StoreConfig(
            flush=flush,
            commitlog_segment_bytes=64 * 1024,
            max_message_bytes=8 * 1024,
            consumequeue_units_per_file=256,
            cq_flush_interval_s=0.05,
            flush_interval_s=0.05,
            consumequeue_max_mapped=64 if queues else 512,
        ),
    )
    out_lock = threading.Lock()
    out.write("READY " + json.dumps(store.recovery.to_dict()) + "\n")
    out.flush()

    def writer(tid: int) -> None:
        rng = random.Random(cycle * 1000 + tid)
        for seq in range(exit_after or 10**9):
            topic = f"Q{rng.randrange(queues)}" if queues else f"T{tid % 2}"
            qid = 0 if queues else seq % 3
            size = rng.choice((0, 1, 100, 700, 3000, 8 * 1024))
            tags = rng.choice((None, "a", "b"))
            r = store.put(topic, qid, body_for(cycle, tid, seq, size), tags=tags)
            if r.status != "PUT_OK":
                sys.stderr.write(f"put failed: {r}\n")
                os._exit(3)
            with out_lock:
                out.write(f"ACK {topic} {qid} {r.queue_offset} {cycle} {tid} {seq} {size}\n")
                out.flush()

    workers = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    os._exit(0)  # no close(): the abort file stays, like after a crash


def main() -> None:
    path, cycle, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    exit_after = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--exit-after" else None
    run(path, cycle, threads, exit_after, sys.stdout)


if __name__ == "__main__":
    main()
