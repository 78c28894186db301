"""Record the replay data of the console's snapshot tests, once, from a real demo.

    .venv/bin/python tests/console/record_stats.py [--after 35] [--out tests/console/recorded/demo]

Starts `floodgate demo` (6 brokers, fault script) headless, waits until the
stalls of broker-2 have been isolated, and saves every broker's
/stats?history=300, the producer's /stats and this host's figures as
brokers/*.json, producers/*.json and host.json.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path

from console.data.host import HostProbe
from console.demo.runner import Demo, DemoOptions


def get(addr: str, path: str) -> dict:
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=5) as r:
        return json.loads(r.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--after", type=float, default=35.0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "recorded" / "demo")
    ap.add_argument("--base-port", type=int, default=22400)
    args = ap.parse_args()
    demo = Demo(DemoOptions(brokers=6, rate=1000, base_port=args.base_port)).start()
    try:
        probe = HostProbe()
        probe.fetch()
        time.sleep(args.after)
        (args.out / "brokers").mkdir(parents=True, exist_ok=True)
        (args.out / "producers").mkdir(parents=True, exist_ok=True)
        for b in demo.cluster.file.brokers:
            doc = get(b.http, "/stats?history=300")
            (args.out / "brokers" / f"{b.name}.json").write_text(json.dumps(doc))
        (args.out / "producers" / "demo.json").write_text(json.dumps(get(demo.producer_addr, "/stats")))
        (args.out / "host.json").write_text(json.dumps(probe.fetch(), indent=1))
    finally:
        demo.stop()
    print(f"recorded into {args.out}")


if __name__ == "__main__":
    main()
