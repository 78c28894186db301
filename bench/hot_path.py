"""The Python a message costs on its hot paths, in-process: no socket, no wake-up.

`cpu_per_message.py` measures what a process spends per message on the host (its
ratios are the goals); this measures only the interpreter's part of it, in a tight
loop with warm caches, so that a change to a hot path can be judged in seconds and
the rest of a process's figure is seen for what it is (the wake-up, the system
calls, caches gone cold between messages). Paths, each fed frames one at a time
as `data_received` gets them from a socket, answers written to a sink:

- echo: the floor's protocol (cpu_per_message.EchoProtocol);
- send: a broker's SEND (BrokerProtocol: decode, checks, the store's append, the
  queue unit, the answer and its figures); flush async, no replication;
- slave: a slave's DATA frame of one record (the write at its offset, the queue
  unit, the ack), from the records a master broker stored.

    .venv/bin/python bench/hot_path.py [--messages 50000] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import peak_rss_mib  # noqa: E402
from proc_figures import EchoProtocol  # noqa: E402

from broker_core import protocol as p  # noqa: E402
from broker_core.ha import wire  # noqa: E402
from broker_core.ha.node import HaNode, HaSettings  # noqa: E402
from broker_core.ha.slave import MasterInfo, ReplicaClient, _Follower  # noqa: E402
from broker_core.protocol.codecs import OutMessage, encode_send  # noqa: E402
from broker_core.server.broker import Broker, BrokerConfig  # noqa: E402
from broker_core.server.tcp import BrokerProtocol  # noqa: E402


class Sink:
    """Where a protocol's answers go instead of a socket."""

    def write(self, data) -> None:
        pass

    def writelines(self, data) -> None:
        pass

    def get_extra_info(self, _name):
        return ("127.0.0.1", 0)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def per_message(feed, frames: list[bytes], rounds: int) -> float:
    """Best round's CPU µs per frame (the least disturbed by the host)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for f in frames:
            feed(f)
        best = min(best, time.process_time() - t0)
    return best / len(frames) * 1e6


def broker(tmp: Path, name: str, port: int) -> Broker:
    return Broker(BrokerConfig(name, tmp / name, port=port, http_port=port + 1,
                               segment_bytes=1 << 30))


async def measure(n: int, rounds: int, size: int) -> dict:
    body = encode_send("hot", -1, OutMessage(b"x" * size))
    sends = [p.encode_frame(p.Op.SEND, i + 1, body) for i in range(n)]
    out = {}

    echo = EchoProtocol()
    echo.connection_made(Sink())
    out["echo"] = per_message(echo.data_received, sends, rounds)

    with tempfile.TemporaryDirectory() as tmp:
        master, slave = broker(Path(tmp), "m", 29500), broker(Path(tmp), "s", 29502)
        try:
            proto = BrokerProtocol(master)
            proto.connection_made(Sink())
            cl = master.store.commitlog
            data_frames = []

            def send_and_keep(frame: bytes) -> None:  # the records, for the slave's part
                at = cl.write_offset
                proto.data_received(frame)
                seg = cl.segment_for(at)
                local = at - seg.start_offset
                data_frames.append(wire.data_frame(at, cl.write_offset, 0, 1, bytes(
                    seg.mm[local : local + cl.write_offset - at])))

            for f in sends:  # warm-up, and what the slave will apply
                send_and_keep(f)
            kept_end = cl.write_offset
            out["send"] = per_message(proto.data_received, sends, rounds)

            node = HaNode(slave, HaSettings("g", 29504, "async", 1.0)).attach()
            client = ReplicaClient(slave.store, node.epochs, "s", "g", MasterInfo("m", "", 1),
                                   lambda: 1, node._on_records, node._on_meta,
                                   node._on_truncate)
            follower = _Follower(client)
            follower.connection_made(Sink())
            follower._welcomed = True
            t0 = time.process_time()
            for f in data_frames:
                follower.data_received(f)
            out["slave"] = (time.process_time() - t0) / len(data_frames) * 1e6
            follower._watch.cancel()
            if client.replica.offset != kept_end:
                raise SystemExit(f"the slave applied up to {client.replica.offset}, "
                                 f"not {kept_end}")
        finally:
            master.close()
            slave.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import uvloop

    got = uvloop.run(measure(args.messages, args.rounds, args.size))
    got["peak_rss_mib"] = round(peak_rss_mib(), 1)
    if args.json:
        print(json.dumps(got))
        return 0
    print(f"CPU µs a message, in-process ({args.messages:,} messages of {args.size} B, "
          f"best of {args.rounds} rounds; the slave: one pass)")
    print("| path | µs | × echo |\n|---|---:|---:|")
    for name in ("echo", "send", "slave"):
        print(f"| {name} | {got[name]:.2f} | {got[name] / got['echo']:.1f}× |")
    print(f"peak RSS {got['peak_rss_mib']} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
