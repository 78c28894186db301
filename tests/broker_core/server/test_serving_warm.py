"""What a broker's loop would otherwise do the first time under load is done before it
serves: the histograms' bucket tables (17-20 ms of numpy in the first fold of put
latencies, on a master and its slave at once) — checked in a fresh process, since this
one may have built them already."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from broker_core.cluster.ports import free_port_range

ROOT = Path(__file__).parents[3]


def test_the_bucket_tables_are_built_before_the_broker_serves(tmp_path):
    port = free_port_range(2)
    script = textwrap.dedent(f"""
        import asyncio, logging, pathlib, threading
        from heatmap import layout
        from broker_core.server.broker import BrokerConfig
        from broker_core.server.runner import serve

        assert layout._tables is None  # nothing built them at import
        serving = threading.Event()

        class Serving(logging.Handler):  # the runner's "serving broker=…" line
            def emit(self, record):
                if record.getMessage().startswith("serving "):
                    serving.set()

        logging.getLogger("floodgate.broker").addHandler(Serving())
        logging.getLogger("floodgate.broker").setLevel(logging.INFO)
        config = BrokerConfig("b1", pathlib.Path({str(tmp_path / "b1")!r}), port={port},
                              http_port={port + 1}, segment_bytes=8 << 20)
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        done = threading.Thread(target=loop.run_until_complete, args=(serve(config, stop),),
                                daemon=True)
        done.start()
        assert serving.wait(30), "the broker did not start"
        print("built" if layout._tables is not None else "not built")
        loop.call_soon_threadsafe(stop.set)
        done.join(20)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "built", out.stderr[-2000:]
